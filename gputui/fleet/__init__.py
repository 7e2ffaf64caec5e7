"""Fleet: a Prometheus exporter for one machine and a view over many.

Exporter side: `exporter` (the collector: the latest Snapshot under dcgm-exporter's
names), `exposition` (text format), `metrics_server` (HTTP), `listen` (--listen).
Reader side: `targets`, `fetch`, `page`, `readings`, `scrape`, `poller`, `prometheus`,
turning pages (or a Prometheus server) into `model` records that `view`, the headless
CLI and the Textual view in `gputui.ui.fleet_app` show. `metric_names` and `hostport`
are shared by both sides. Nothing in this package imports textual.
"""
