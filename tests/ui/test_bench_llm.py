"""The LLM benchmarks in the TUI: their own form fields, the result rows (MFU, TTFT/TPOT,
MBU), the sweep's latency-against-throughput curve, and the 80×24 layout."""

from __future__ import annotations

from gputui.bench import flops, llm_metrics
from gputui.bench.events import Point
from gputui.bench.lm_view import flops_rows, llm_rows
from gputui.bench.result import Result
from gputui.ui.widgets.bench_chart import sweep_curve
from gputui.ui.widgets.bench_form import parse_form
from tests.ui.bench_helpers import make_app, open_bench, pick, type_into
from tests.ui.helpers import screen_text


def test_form_fields_become_lm_infer_params() -> None:
    request = parse_form("lm-infer", {"f-prompt-len": "12", "f-new-tokens": "5",
                                      "precision": "auto", "device": "cpu"})
    assert request.params == {"prompt_len": 12, "new_tokens": 5}
    assert request.precision == "auto" and request.model is None  # chosen per device
    # A benchmark without those parameters ignores the (hidden) fields.
    assert not parse_form("cnn-train", {"f-prompt-len": "12"}).params


def test_result_rows_say_mfu_ttft_tpot_and_mbu() -> None:
    llm = llm_metrics.summarize([[10.0, 2.0, 2.0], [12.0, 3.0, 3.0]], batch_size=1,
                                prompt_tokens=4, new_tokens=3, weight_bytes=1000,
                                kv_read_bytes=100, peak_bytes_per_s=1e6, decode="eager")
    f = flops.make(1e9, "analytic", 2e5, 989.4, dtype="bf16", formula="6N")
    r = Result(id="x", benchmark="lm-infer", status="ok", device="cuda:0", llm=llm, flops=f)
    text = dict(flops_rows(r) + llm_rows(r))
    assert text["MFU"] == "200.0 TFLOP/s, MFU 20.2 % of the 989.4 TFLOP/s dense bf16 peak"
    assert text["TTFT"].startswith("p50 11") and "(from 2 values)" in text["TTFT"]
    assert text["TPOT"].startswith("p50 2.5")
    assert "MBU" in text["decode bandwidth"]
    assert "launch-bound" in text["decoding"]  # eager decoding on a GPU says what it measures


def test_sweep_curve_plots_tpot_against_tokens_per_s() -> None:
    points = [Point(label=f"batch {b}", batch_size=b, throughput=tps, unit="tokens/s",
                    extra={"tpot_ms_p90": tpot})
              for b, tps, tpot in ((1, 100.0, 10.0), (2, 180.0, 11.0), (4, 300.0, 13.0))]
    curve = sweep_curve(points)
    assert curve.latency_label == "p90 TPOT (ms)"
    assert curve.p90_ms == (10.0, 11.0, 13.0) and curve.throughput == (100.0, 180.0, 300.0)


async def test_80x24_keeps_the_settings_and_the_headline_in_sight() -> None:
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_bench(pilot)
        await pick(pilot, screen, "lm-infer")
        text = screen_text(app)
        assert "precision" in text and "batch size" in text  # settings, not only the catalog
        assert "THROUGHPUT" in text  # the results table's headline column
        await type_into(pilot, screen, "f-prompt-len", "9")  # the form scrolls to its field
        await pilot.pause()
        assert "prompt len  9" in screen_text(app)


async def test_live_lm_train_shows_model_tflops_for_the_model_the_worker_picked() -> None:
    from datetime import timedelta

    from gputui.bench import events
    from gputui.bench.attribution import ThroughputPoint
    from gputui.bench.fmt import fmt_num
    from gputui.bench.lm_shapes import shape_of
    from gputui.ui.bench_messages import RunEvent
    from gputui.ui.bench_session import LiveRun, Planned, request_label
    from tests.ui.bench_helpers import SIZE
    from tests.ui.helpers import T0

    # As the form sends it: no model, the device picks one (gpt-tiny on the CPU).
    request = parse_form("lm-train", {"precision": "auto", "device": "cpu"})
    assert request.model is None
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_bench(pilot)
        app.bench.lives["fed"] = LiveRun(
            Planned(request, request_label(request), id="fed"), started_wall=T0)
        ran = {**request.to_dict(), "model": "gpt-tiny", "precision": "fp32"}
        app.post_message(RunEvent("fed", events.Started(pid=1, benchmark="lm-train", spec=ran,
                                                        env={"device": "cpu"}), None))
        rate = 200_000.0
        progress = events.Progress(step=1, of=None, elapsed_s=0.5, duration_s=None,
                                   throughput=rate, unit="tokens/s", window_s=0.5,
                                   samples=100_000)
        app.post_message(RunEvent("fed", progress,
                                  ThroughputPoint(T0 + timedelta(seconds=0.5), 0.5, rate)))
        await pilot.pause()
        await pilot.pause()
        tflops = flops.lm_train_per_token(shape_of("gpt-tiny", None)) * rate / 1e12
        assert f"model FLOPs: ≈ {fmt_num(tflops)} TFLOP/s" in screen_text(app)
