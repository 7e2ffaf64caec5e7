"""Fleet: a Prometheus exporter for one machine and a view over many.

`exporter` serves the latest Snapshot as dcgm-exporter-compatible metrics;
`scrape` reads such pages (or a Prometheus server) back into `model` records
that the headless CLI and the Textual view in `gputui.ui.fleet_app` show.
Nothing in this package imports textual.
"""
