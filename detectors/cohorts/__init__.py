"""Cohort correlation: is a key's incidence concentrated in hosts with one attribute value?

The engine of ``hardware_correlation`` (key = crash signature) and of the
cohort part of ``telemetry_cohort`` (key = telemetry kind and code).

What is counted: the key's *units* (``detectors.units``: a job once, a host
once an hour, bursts capped) as decayed counts at several scales (an hour to
a month, ``detectors.decay``), per attribute value of the host at the case's
time, and the host-time each value held in the fleet over the same kernel
(``Inventory.exposure``). Every ``attribute=value`` the hosts carry is a
hypothesis; the keys are whatever the announcements hold.

The test, at every step boundary, for each (key, value, scale) that got a
case: of the key's units on hosts announcing the attribute, is the share on
the value larger than the value's share of the host-time? A binomial tail on
*effective* counts (``kish_n`` over hosts: twenty cases from one crash-looping
host are nearer one unit than twenty), with the relative risk's lower 95 %
bound above ``min_rr_lower`` and at least ``min_hosts`` affected hosts in the
cohort. Benjamini-Hochberg runs over every test of the step, across all keys
and attributes at once, with an absolute ceiling ``alpha``.

New or static? A cohort that passes is compared with its own long-run share
(the month-to-half-year kernel minus the day's, or the window's when it is
longer): if its share now is not
significantly above its share before, the association has always been there
— a signature that lives on one GPU model because of where jobs run — and
is reported once as a ticket (``static_association``); its long-run relative
risk then becomes the baseline that later windows are tested against, so it
pages only if it rises. A key with no history before the window is new (a
page) unless it has been there since the stream began: then its first day
(recorded at the end of warm-up) is the comparison, and an association that
was there from the start is static. A key first seen after the warm-up has
no static association for ``NEW_KEY_MS``: its history is the outbreak's.

Explanation, strongest first among a key's accepted cohorts (and those
already firing): a cohort is reported only if its cases *outside* the
cohorts already accepted are still significant against its hosts outside
them. A datacenter whose excess lives in one rack is named in the rack's
notes; a cohort with the same hosts as an accepted one (a driver rolled out
to one GPU model only) is an alias: the data cannot tell them apart.
"""

from fleetepi.detectors.cohorts.correlation import CohortCorrelation, cohort_correlation_from_config
from fleetepi.detectors.cohorts.state import CohortKey, CohortTest, CohortVerdict, PairCounts, rate_ratio_ci
from fleetepi.detectors.inventory import pair_key

__all__ = ["CohortCorrelation", "CohortKey", "CohortTest", "CohortVerdict", "PairCounts",
           "cohort_correlation_from_config", "pair_key", "rate_ratio_ci"]
