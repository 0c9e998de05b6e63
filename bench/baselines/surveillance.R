# Classical outbreak detection baselines (R package 'surveillance') on hourly
# count series. Called ONCE per benchmark run with every series in one CSV:
#
#   Rscript surveillance.R IN.csv OUT.csv N_HOURS METHODS ALPHA B W FREQ
#
# IN.csv : series,hour,count   (sparse: missing hours are 0; hour is 0-based)
# OUT.csv: method,series,hour  (one row per alarm; hour 0-based)
# METHODS: comma list of C1,C2,C3,farrington
# ALPHA  : alarm level of every method (earsC's default is 0.001)
# B, W   : farringtonFlexible's years back and half window, in periods of
#          FREQ hours (FREQ=24: "years" are days, so the daily cycle is the season)
#
# earsC (CDC EARS C1-C3) compares each hour with the 7 hours before it
# (C2/C3 with a 2-hour guard). farringtonFlexible fits a quasi-Poisson GLM to
# the same hours of the B previous days +-W hours; with its default
# limit54 = c(5, 4) it can only alarm where the last 4 hours hold >= 5 cases,
# so those are the only hours it is evaluated at (exactly the same alarms,
# a fraction of the GLM fits).
suppressPackageStartupMessages(library(surveillance))

args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 8) {
  stop("usage: surveillance.R IN.csv OUT.csv N_HOURS METHODS ALPHA B W FREQ")
}
inp <- args[1]
out <- args[2]
n_hours <- as.integer(args[3])
methods <- strsplit(args[4], ",")[[1]]
alpha <- as.numeric(args[5])
b <- as.integer(args[6])
w <- as.integer(args[7])
freq <- as.integer(args[8])

d <- read.csv(inp, colClasses = c("character", "integer", "numeric"))
ids <- sort(unique(d$series))
m <- matrix(0, nrow = n_hours, ncol = length(ids))
if (nrow(d) > 0) {
  m[cbind(d$hour + 1L, match(d$series, ids))] <- d$count
}
rows <- list()

baseline <- 7L
ears_first <- baseline + 2L + 3L  # room for C3's guard and its 3-hour sum
for (meth in intersect(c("C1", "C2", "C3"), methods)) {
  if (length(ids) == 0 || n_hours < ears_first) next
  s <- sts(observed = m, frequency = freq, start = c(1, 1))
  r <- suppressWarnings(earsC(s, control = list(method = meth, baseline = baseline, alpha = alpha,
                                                range = ears_first:n_hours)))
  al <- alarms(r)
  hit <- which(al == 1, arr.ind = TRUE)
  if (length(hit) > 0) {
    hit <- matrix(hit, ncol = 2)
    rows[[length(rows) + 1]] <- data.frame(method = meth, series = ids[hit[, 2]],
                                           hour = (ears_first:n_hours)[hit[, 1]] - 1L)
  }
}

if ("farrington" %in% methods) {
  first <- b * freq + w + 1L
  for (j in seq_along(ids)) {
    y <- m[, j]
    last4 <- stats::filter(y, rep(1, 4), sides = 1)
    idx <- which(!is.na(last4) & last4 >= 5)
    idx <- idx[idx > first]
    if (length(idx) == 0) next
    s <- sts(observed = matrix(y, ncol = 1), frequency = freq, start = c(1, 1))
    ctl <- list(range = idx, b = b, w = w, alpha = alpha, noPeriods = 1, populationOffset = FALSE,
                pastWeeksNotIncluded = w, limit54 = c(5, 4), thresholdMethod = "delta")
    r <- tryCatch(suppressWarnings(farringtonFlexible(s, control = ctl)), error = function(e) NULL)
    if (is.null(r)) next
    al <- as.vector(alarms(r))
    hit <- which(al == 1)
    if (length(hit) > 0) {
      rows[[length(rows) + 1]] <- data.frame(method = "farrington", series = ids[j], hour = idx[hit] - 1L)
    }
  }
}

res <- if (length(rows) > 0) do.call(rbind, rows) else data.frame(method = character(), series = character(),
                                                                    hour = integer())
write.csv(res, out, row.names = FALSE, quote = TRUE)
