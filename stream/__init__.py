"""Stream workers: the detectors on a real Kafka broker (faust-streaming), and a local broker for dev and tests.

See docs/stream.md. Nothing here is imported by the embedded path
(``fleetepi replay``/``demo``), so faust stays an optional dependency.
"""
