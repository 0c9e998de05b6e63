"""The Grafana dashboard of fleetepi: its queries, its generated JSON and a PNG of its main panels.

``queries.py`` holds every PromQL expression; ``build.py`` turns them into the
committed Grafana JSON (deploy/grafana/fleetepi-dashboard.json); ``render.py``
draws the main panels with matplotlib from the same queries run against a
Prometheus HTTP API (``prom.py``). ``fleetepi dashboard build|render`` is the CLI.
Heavy imports (grafanalib, matplotlib, httpx) happen in those modules only.
"""
