# Classical outbreak detection baselines (R package 'surveillance') on hourly
# count series. Called ONCE per benchmark run with every series in one CSV:
#
#   Rscript surveillance.R IN.csv OUT.csv N_HOURS METHODS ALPHA B W FREQ MIN_SIGMA
#
# IN.csv : series,hour,count   (sparse: missing hours are 0; hour is 0-based)
# OUT.csv: method,series,hour  (one row per alarm; hour 0-based)
# METHODS: comma list of C1,C2,C3,farrington
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
suppressPackageStartupMessages(library(surveillance))

args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 9) {
  stop("usage: surveillance.R IN.csv OUT.csv N_HOURS METHODS ALPHA B W FREQ MIN_SIGMA")
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

res <- if (length(rows) > 0) do.call(rbind, rows) else data.frame(method = character(), series = character(),
                                                                    hour = integer())
write.csv(res, out, row.names = FALSE, quote = TRUE)
