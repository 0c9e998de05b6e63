# Classical outbreak detection baselines (R package 'surveillance') on hourly
# count series. Called ONCE per benchmark run with every series in one CSV:
#
#   Rscript surveillance.R IN.csv OUT.csv N_HOURS METHODS ALPHA B W FREQ MIN_SIGMA [GLR_C WARMUP_HOURS]
#
# IN.csv : series,hour,count   (sparse: missing hours are 0; hour is 0-based)
# OUT.csv: method,series,hour  (one row per alarm; hour 0-based)
# METHODS: comma list of C1,C2,C3,farrington,glrpois
# ALPHA  : alarm level of every method (earsC's default is 0.001)
# B, W   : farringtonFlexible's years back and half window, in periods of
#          FREQ hours (FREQ=24: "years" are days, so the daily cycle is the season)
#
# earsC (CDC EARS C1-C3) compares each hour with the 7 hours before it
# (C2/C3 with a 2-hour guard); MIN_SIGMA floors the baseline's standard
# deviation (hourly series are sparse: with sd 0, every single event would
# alarm). An earsC alarm needs y[t] > mean(ref) + z * max(sd, MIN_SIGMA), so
# y[t] - min(ref) > z * MIN_SIGMA; C3 needs it at t-1 or t-2 with z/2 + 1.
# Only those candidate hours are evaluated (earsC takes any range for C1/C2,
# contiguous ones for C3): exactly the alarms of a full run, at a fraction of
# its cost (a full run is ~20 ms per series and method).
# farringtonFlexible fits a quasi-Poisson GLM to the same hours of the B
# previous days +-W hours. It is only evaluated where it can alarm: its
# default limit54 = c(5, 4) needs >= 5 cases in the last 4 hours, and the
# hour must exceed every reference value (below that, its upper bound, which
# is above the reference mean by >= 3 standard errors at ALPHA 0.001, is not
# reached). Same alarms, a fraction of the ~25 ms GLM fits.
#
# glrpois (GLR detector for an increase of a Poisson intercept, Hoehle & Paul
# 2008) monitors every hour after WARMUP_HOURS with threshold GLR_C (c.ARL),
# M = -1 (all history since the last alarm; the package supports no window
# for intercept charts), and resets after each alarm. Its in-control mean mu0
# is learned from the warm-up only: the daily shape of a Poisson GLM with one
# 24-hour harmonic (flat when the warm-up holds fewer than 24 events), scaled
# to the upper one-sided 95 % bound of the warm-up rate (Garwood): a 3-day
# estimate of a sparse series is noisy, and a GLR on a low estimate would
# alarm on the estimation error alone. A series never seen in the warm-up
# gets the bound of zero events (3.0 / WARMUP_HOURS). c.ARL 7 gives 0.01-0.03
# alarms per series-week on in-control Poisson series of 0.05-5 events an
# hour (checked by simulation; the default 5 gives 0.06-0.12). glrpois runs on
# every series that has a count after the warm-up; one with none cannot alarm
# (the GLR for an increase is 0 when every count is 0), so it is skipped: the
# same alarms as a full run (tests/simulate/test_baselines.py checks).
suppressPackageStartupMessages(library(surveillance))

args <- commandArgs(trailingOnly = TRUE)
if (!(length(args) %in% c(9, 11))) {
  stop("usage: surveillance.R IN.csv OUT.csv N_HOURS METHODS ALPHA B W FREQ MIN_SIGMA [GLR_C WARMUP_HOURS]")
}
inp <- args[1]
out <- args[2]
n_hours <- as.integer(args[3])
methods <- strsplit(args[4], ",")[[1]]
alpha <- as.numeric(args[5])
b <- as.integer(args[6])
w <- as.integer(args[7])
freq <- as.integer(args[8])
min_sigma <- as.numeric(args[9])
glr_c <- if (length(args) >= 11) as.numeric(args[10]) else 7
warm <- if (length(args) >= 11) as.integer(args[11]) else 72L

d <- read.csv(inp, colClasses = c("character", "integer", "numeric"))
ids <- sort(unique(d$series))
m <- matrix(0, nrow = n_hours, ncol = length(ids))
if (nrow(d) > 0) {
  m[cbind(d$hour + 1L, match(d$series, ids))] <- d$count
}
rows <- list()

baseline <- 7L
ears_first <- baseline + 2L + 3L  # room for C3's guard and its 3-hour sum
z <- qnorm(1 - alpha)
runs_of <- function(idx) split(idx, cumsum(c(1, diff(idx) != 1)))
ears <- intersect(c("C1", "C2", "C3"), methods)
if (length(ears) > 0 && n_hours > ears_first) {
  t_all <- ears_first:n_hours
  # min over the union of C1's and C2's reference hours (t-9 .. t-1)
  ref_min <- matrix(Inf, nrow = length(t_all), ncol = ncol(m))
  for (lag in 1:(baseline + 2L)) ref_min <- pmin(ref_min, m[t_all - lag, , drop = FALSE])
  excess <- m[t_all, , drop = FALSE] - ref_min
  for (j in which(apply(excess, 2, max) > min(z, z / 2 + 1) * min_sigma)) {
    s <- sts(observed = matrix(m[, j], ncol = 1), frequency = freq, start = c(1, 1))
    for (meth in ears) {
      need <- if (meth == "C3") z / 2 + 1 else z
      cand <- t_all[excess[, j] > need * min_sigma]
      if (meth == "C3") cand <- sort(unique(c(cand + 1L, cand + 2L)))
      cand <- cand[cand >= ears_first & cand <= n_hours]
      if (length(cand) == 0) next
      pieces <- if (meth == "C3") runs_of(cand) else list(cand)
      for (rng in pieces) {
        # earsC's C3 drops a dimension on a one-hour range: evaluate a neighbour hour too
        if (meth == "C3" && length(rng) == 1) rng <- if (rng < n_hours) c(rng, rng + 1L) else c(rng - 1L, rng)
        r <- suppressWarnings(earsC(s, control = list(method = meth, baseline = baseline, alpha = alpha,
                                                      minSigma = min_sigma, range = rng)))
        hit <- which(as.vector(alarms(r)) == 1)
        if (length(hit) > 0) {
          rows[[length(rows) + 1]] <- data.frame(method = meth, series = ids[j], hour = rng[hit] - 1L)
        }
      }
    }
  }
}

if ("farrington" %in% methods) {
  first <- b * freq + w + 1L
  offsets <- as.vector(outer(-w:w, (1:b) * freq, function(o, k) o - k))
  for (j in seq_along(ids)) {
    y <- m[, j]
    last4 <- stats::filter(y, rep(1, 4), sides = 1)
    idx <- which(!is.na(last4) & last4 >= 5)
    idx <- idx[idx > first]
    if (length(idx) == 0) next
    ref_max <- vapply(idx, function(t) max(y[t + offsets]), numeric(1))
    idx <- idx[y[idx] > ref_max]
    if (length(idx) == 0) next
    s <- sts(observed = matrix(y, ncol = 1), frequency = freq, start = c(1, 1))
    # farringtonFlexible wants a contiguous range: one call per run of hours
    for (rng in runs_of(idx)) {
      ctl <- list(range = rng, b = b, w = w, alpha = alpha, noPeriods = 1, populationOffset = FALSE,
                  pastWeeksNotIncluded = w, limit54 = c(5, 4), thresholdMethod = "delta")
      r <- tryCatch(suppressWarnings(farringtonFlexible(s, control = ctl)), error = function(e) NULL)
      if (is.null(r)) next
      hit <- which(as.vector(alarms(r)) == 1)
      if (length(hit) > 0) {
        rows[[length(rows) + 1]] <- data.frame(method = "farrington", series = ids[j], hour = rng[hit] - 1L)
      }
    }
  }
}

if ("glrpois" %in% methods && n_hours > warm + 1) {
  t_mon <- (warm + 1L):n_hours
  hh <- seq_len(n_hours)
  X <- cbind(1, sin(2 * pi * hh / freq), cos(2 * pi * hh / freq))
  for (j in seq_along(ids)) {
    y <- m[, j]
    if (sum(y[t_mon]) == 0) next
    yw <- y[1:warm]
    shape <- rep(1, length(t_mon))
    if (sum(yw) >= 24) {
      fit <- suppressWarnings(glm.fit(X[1:warm, ], yw, family = poisson()))
      if (fit$converged && all(is.finite(fit$coefficients))) {
        shape <- as.vector(exp(X[t_mon, ] %*% fit$coefficients))
        shape <- shape / mean(exp(X[1:warm, ] %*% fit$coefficients))
      }
    }
    mu0 <- shape * qgamma(0.95, sum(yw) + 1) / warm
    s <- sts(observed = matrix(y, ncol = 1), frequency = freq, start = c(1, 1))
    r <- glrpois(s, control = list(range = t_mon, c.ARL = glr_c, mu0 = mu0, Mtilde = 1, M = -1,
                                   change = "intercept", theta = NULL, dir = "inc", ret = "value"))
    hit <- which(as.vector(alarms(r)) == 1)
    if (length(hit) > 0) {
      rows[[length(rows) + 1]] <- data.frame(method = "glrpois", series = ids[j], hour = t_mon[hit] - 1L)
    }
  }
}

res <- if (length(rows) > 0) do.call(rbind, rows) else data.frame(method = character(), series = character(),
                                                                    hour = integer())
write.csv(res, out, row.names = FALSE, quote = TRUE)
