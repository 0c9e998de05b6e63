"""Hardware telemetry sources of the node agent: kernel log (Xid, SXid, EDAC, MCE),
EDAC sysfs counters, NVML (ECC, retired pages, row remapping, temperature,
throttle reasons) and hwmon temperatures. Each one is optional."""
