"""The bench's report: its figures against their targets as Markdown tables, and the JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from app.bench.plan import LARGE_CASES, SHAPES, TARGETS, Target
from app.bench.stats import NOISE_LIMIT, too_noisy
from app.bench.ttft import STEPS as TTFT_STEPS

NOISY = "too noisy for a verdict"
CPU_DEVICE = "no verdict: a CPU-type device"
NO_GPU = "no GPU here"


def figure(doc: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of the JSON; KeyError when the bench did not measure it."""
    value: Any = doc
    for key in path.split("."):
        value = value[key]
    return value


def _ci(doc: dict[str, Any], path: str) -> list[float] | None:
    try:
        ci = figure(doc, path + "_ci")
    except KeyError:
        return None
    return [float(ci[0]), float(ci[1])]


def verdict(doc: dict[str, Any], target: Target) -> tuple[str, str, str]:
    """One target's row: the figure as shown, the target as shown, and whether it is met.

    A figure with a confidence interval wider than the noise limit gets no yes or no when the
    interval reaches the target: on a machine that noisy either would be a guess. An interval
    wholly on one side of the target, however wide, answers for itself.
    """
    if target.path.startswith("gpu.") and not doc.get("gpu", {}).get("present", True):
        return "-", f"{target.op} {target.value:g}", NO_GPU
    try:
        value = float(figure(doc, target.path))
        goal = target.value * float(figure(doc, target.of)) if target.of else target.value
    except (KeyError, TypeError):
        return "not measured", f"{target.op} {target.value:g}", "not measured"
    if target.path.startswith("gpu.") and doc["gpu"].get("device_type") == "cpu":
        # A Vulkan driver that runs on the CPU: it shows offloading is right, not fast.
        return f"{value:g}", f"{target.op} {goal:g}", CPU_DEVICE
    met = {">=": value >= goal, "<=": value <= goal, "==": value == goal}[target.op]
    shown, wanted = f"{value:g}", f"{target.op} {goal:g}"
    if target.of:
        wanted = f"{target.op} {target.value:g} x {target.of} (= {goal:.4g})"
    ci = _ci(doc, target.path)
    if ci is not None:
        shown += f" [{ci[0]:g}, {ci[1]:g}]"
        if target.ci_floor is not None:
            wanted += f", interval from {target.ci_floor:g}"
            met = met and ci[0] >= target.ci_floor
        if too_noisy(value, ci):
            if target.op == "==" or ci[0] <= goal <= ci[1]:
                return shown, wanted, NOISY
            # Wide, but all of it on one side of the target: that side is the verdict.
            beyond = ci[0] > goal if target.op == ">=" else ci[1] < goal
            met = beyond and (target.ci_floor is None or ci[0] >= target.ci_floor)
    return shown, wanted, "yes" if met else "NO"


def _targets_table(doc: dict[str, Any], only: str = "") -> list[str]:
    lines = ["| figure | Floodgate | target | met |", "| --- | --- | --- | --- |"]
    for target in TARGETS:
        if not target.path.startswith(only):
            continue
        shown, wanted, met = verdict(doc, target)
        lines.append(f"| {target.path} | {shown} | {wanted} | {met} |")
    return lines


def _designs_table(doc: dict[str, Any]) -> list[str]:
    lines = [
        "| same stream, design | loop lag p99 / max | token→screen p95 "
        "| fire hose loop lag p99 | fire hose not shown |",
        "| --- | --- | --- | --- | --- |",
    ]
    designs = {"Floodgate (frame pump)": doc, **doc["baselines"]}
    for name, d in designs.items():
        lag, t2s, fire = d["loop_lag_ms"], d["token_to_screen_ms"], d["firehose"]
        lines.append(
            f"| {name} | {lag['p99']:.1f} / {lag['max']:.1f} ms | {t2s['p95']:.1f} ms "
            f"| {fire['loop_lag_ms']['p99']:.1f} ms | {fire['lost']} |"
        )
    return lines


def _native_lines(tp: dict[str, Any]) -> list[str]:
    """The throughput pairs against the native loop: its rates, the pairs, the best count."""
    lines = [
        f"native (lean C-API loop) {tp['native_tok_s']} tok/s; pairs per reference: "
        f"{len(tp['pairs'])}; intervals are 95 % bootstrap intervals of the median ratio, "
        f"a verdict needs one within ±{NOISE_LIMIT:.0%}",
    ]
    if "best_native_ratio" in tp:
        lines.append(
            f"app at its {tp['app_threads']} decode threads over the native loop at its best "
            f"count ({tp['best_native_threads']}, {tp['best_native_tok_s']} tok/s): "
            f"{tp['best_native_ratio']} {tp['best_native_ratio_ci']}"
        )
    return lines


def _throughput_alone_lines(doc: dict[str, Any]) -> list[str]:
    """The throughput section run alone (the whole run says it in its summary)."""
    tp = doc.get("throughput")
    if tp is None:
        return []
    return [
        *_threads_table({"threads": tp["threads"]}),
        "",
        f"raw {tp['raw_tok_s']} tok/s, app {tp['app_tok_s']} tok/s",
        *_native_lines(tp),
    ]


def _summary_lines(doc: dict[str, Any]) -> list[str]:
    tp, panel, long = doc["throughput"], doc["diagnostics_panel"], doc["long_reply"]
    hose = doc["firehose"]
    lines = [
        f"raw {tp['raw_tok_s']} tok/s, app {tp['app_tok_s']} tok/s "
        f"({doc['machine']['threads']} threads); diagnostics panel shown/hidden tok/s ratio "
        f"{panel['ratio']} (UI thread {panel['ui_ms_per_token_shown']} against "
        f"{panel['ui_ms_per_token_hidden']} ms per token); one update "
        f"{long['early_update_ms']} ms early, "
        f"{long['late_update_ms']} ms after {long['pieces']} pieces; fire hose "
        f"{hose['updates_per_s']} updates/s, RSS {hose['rss_growth_mb']:+} MB",
        "",
        *_native_lines(tp),
    ]
    if "prefill" in doc:
        pre = doc["prefill"]
        lines.append(
            f"prefill ({pre['prompt_tokens']} tokens, {pre['threads_batch']} threads): "
            f"llama-cpp-python {pre['raw_tok_s']} tok/s, Floodgate {pre['app_tok_s']} tok/s, "
            f"ratio {pre['ratio']} {pre['ratio_ci']}; Llama.eval at its best count "
            f"({pre['best_eval_threads']}) {pre['best_eval_tok_s']} tok/s, best_ratio "
            f"{pre['best_ratio']} {pre['best_ratio_ci']}"
        )
    trace = doc.get("trace", {})
    if "ratio" in trace:
        lines.append(
            f"flow trace: recording {trace['recording_tok_s']} tok/s, not recording "
            f"{trace['not_recording_tok_s']} tok/s, trace.ratio {trace['ratio']} "
            f"{trace['ratio_ci']}; {trace['events']} events in one reply's trace, "
            f"{len(trace['problems'])} problems"
        )
    elif "note" in trace:
        lines.append(f"flow trace: {trace['note']}")
    remote = doc["remote"]
    rtp, rstop = remote["throughput"], remote["stop_ms"]
    lines += [
        "",
        f"server (llama_cpp.server on loopback): plain client {rtp['plain_tok_s']} tok/s, "
        f"Floodgate {rtp['app_tok_s']} tok/s, remote.throughput.ratio {rtp['ratio']} "
        f"{rtp.get('ratio_ci', '')}; remote.stop_ms p50 {rstop['p50']}, p95 {rstop['p95']}, "
        f"max {rstop['max']} (n={rstop['n']})",
    ]
    fetched = doc.get("download")
    if fetched:
        lines.append(
            f"download ({fetched['mib']} MiB from the fake Hub on loopback): plain httpx stream "
            f"{fetched['plain_mib_s']} MiB/s, Floodgate {fetched['app_mib_s']} MiB/s, "
            f"download.ratio {fetched['ratio']} {fetched['ratio_ci']}; loop lag p99 "
            f"{fetched['loop_lag_ms']['p99']} ms"
        )
    return lines


def _shapes_table(doc: dict[str, Any]) -> list[str]:
    shapes = doc["long_reply"].get("shapes")
    if not shapes:
        return []
    lines = [
        "| long reply shape | characters | update p99 early | late | late / early |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in SHAPES:
        s = shapes[name]
        note = " (over the time cap)" if s["over_cap"] else ""
        lines.append(
            f"| {name} | {s['chars']} | {s['early_update_ms']:.2f} ms "
            f"| {s['late_update_ms']:.2f} ms{note} | {s['ratio']} |"
        )
    return ["", *lines]


def _large_table(doc: dict[str, Any]) -> list[str]:
    large = doc.get("large_messages")
    if not large:
        return []
    lines = [
        f"| one large message ({large['chars']} characters) | longest stall | took "
        "| memory after it |",
        "| --- | --- | --- | --- |",
    ]
    for name in LARGE_CASES:
        case = large[name]
        lines.append(
            f"| {name} | {case['stall_ms']:.1f} ms | {case['seconds']:.2f} s "
            f"| {case['rss_mb']:+.1f} MB |"
        )
    return ["", *lines]


def _threads_table(doc: dict[str, Any]) -> list[str]:
    threads = doc.get("threads")
    if not threads:
        return []
    decode, prefill, app = threads["decode_tok_s"], threads["prefill_tok_s"], threads["app"]
    lines = [
        f"tok/s at each thread count (median of {threads['rounds']} rounds; native loop and "
        "Llama.eval in a bare child process, the app on its worker's thread through the window):",
        "",
        "| threads | decode: native | decode: app | app's own measurement "
        "| prefill: Llama.eval | prefill: app |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n in threads["counts"]:
        key = str(n)
        own = app["rates"].get(key)
        lines.append(
            f"| {n} | {decode['native'][key]:.1f} | {decode['app'][key]:.1f} "
            f"| {'' if own is None else f'{own:.1f}'} "
            f"| {prefill['eval'][key]:.1f} | {prefill['app'][key]:.1f} |"
        )
    lines += [
        "",
        f"the app decodes on {app['n_threads']} threads ({app['source']}) and processes prompts "
        f"on {app['n_threads_batch']}; fastest native decode at {threads['native_best']}, "
        f"fastest Llama.eval at {threads['eval_best']}",
    ]
    return ["", *lines]


def _ttft_table(doc: dict[str, Any]) -> list[str]:
    ttft = doc.get("ttft_ms")
    if not ttft:
        return []
    plain = ttft.get("without_cache", {})
    lines = [
        f"time to first token, {ttft['history_tokens']}-token history, replies of "
        f"{ttft.get('long_reply_tokens', '?')} tokens before the follow-ups "
        f"(median of {ttft['runs']} runs; without the cache, of "
        f"{ttft.get('runs_without_cache', ttft['runs'])}):",
        "",
        "| step | with the cache | prompt tokens (cached) | without the cache |",
        "| --- | --- | --- | --- |",
    ]
    for step in TTFT_STEPS:
        if step not in ttft:
            continue
        s = ttft[step]
        other = plain.get(step, {}).get("ms", math.nan)
        lines.append(
            f"| {step} | {s['ms']:.0f} ms | {s['prompt_tokens']} ({s['cached_tokens']}) "
            f"| {other:.0f} ms |"
        )
    lines.append("")
    lines.append(
        f"prefill_progress_cost {ttft.get('prefill_progress_cost')} "
        f"{ttft.get('prefill_progress_cost_ci', '')}; cache_consistent "
        f"{ttft.get('cache_consistent')}" + (f"; {ttft['note']}" if ttft.get("note") else "")
    )
    return ["", *lines]


def _download_lines(doc: dict[str, Any]) -> list[str]:
    fetched = doc.get("download")
    if not fetched:
        return []
    return [
        "",
        f"downloads of {fetched['mib']} MiB: plain stream written and synced "
        f"{fetched['plain_mib_s']} MiB/s, Floodgate {fetched['app_mib_s']} MiB/s (median of "
        f"{len(fetched['pairs'])} pairs); plain stream into the page cache only "
        f"{fetched['page_cache_mib_s']} MiB/s (page_cache_ratio {fetched['page_cache_ratio']} "
        f"{fetched['page_cache_ratio_ci']})",
    ]


def _server_lines(doc: dict[str, Any]) -> list[str]:
    server = doc.get("server")
    if not server:
        return []
    tp, stop = server["throughput"], server["stop_on_disconnect_ms"]
    own, peer = server["busy_after_disconnect_ms"], server["peer"]["busy_after_disconnect_ms"]
    turns, slow = server["ttft_second_turn"], server["slow_reader"]
    lines = [
        f"local API server: one client {tp['client_tok_s']} tok/s, the window "
        f"{tp['window_tok_s']} tok/s, server.throughput.ratio {tp['ratio']} {tp['ratio_ci']}; "
        f"second turn TTFT API {turns['api_ms']} ms, window {turns['window_ms']} ms; "
        f"slow reader RSS {slow['rss_growth_mb']:+} MB over {slow['seconds']} s "
        f"(worker paused: {slow['worker_paused']})",
        "",
        "| client leaves during | Floodgate: close to compute end p50 / p95 / max "
        "| Floodgate: busy after, p50 / max | llama_cpp.server: busy after, p50 / max |",
        "| --- | --- | --- | --- |",
    ]
    for kind in ("prefill", "decode"):
        s, o, p = stop[kind], own[kind], peer[kind]
        lines.append(
            f"| {kind} | {s['p50']} / {s['p95']} / {s['max']} ms (n={s['n']}) "
            f"| {o['p50']} / {o['max']} ms (n={o['n']}) | {p['p50']} / {p['max']} ms (n={p['n']}) |"
        )
    return ["", *lines]


def _parallel_lines(doc: dict[str, Any]) -> list[str]:
    section = doc.get("parallel")
    if not section:
        return []
    ratio, rates = section["aggregate_ratio"], section["aggregate_tok_s"]
    stall, slow, peer = section["prefill_stall"], section["slow_reader"], section["peer"]
    gap = section["gap_ms"]
    lines = [
        f"replies side by side ({section['tokens_per_stream']} tokens a stream, "
        f"{section['threads']} threads, median of {section['rounds']} rounds):",
        "",
        "| streams | total tok/s | over one stream |",
        "| --- | --- | --- |",
        f"| 1 | {rates['1']} | 1 |",
    ]
    for n in (key for key in rates if key != "1"):
        lines.append(f"| {n} | {rates[n]} | {ratio[n]} {ratio[n + '_ci']} |")
    lines += [
        "",
        f"native batched loop at 4 streams {section['native_tok_s']} tok/s, "
        f"parallel.native_ratio {section['native_ratio']} {section['native_ratio_ci']}; gap "
        f"between pieces at 4 streams p50 {gap['p50']} ms, p99 {gap['p99']} ms; beside a "
        f"{stall['newcomer_prompt_tokens']}-token prompt p99 {stall['gap_ms_while_read']['p99']}"
        f" ms against {stall['gap_ms_without']['p99']} ms without",
        f"slow reader (100 bytes/s through the API server), {len(slow['rounds'])} rounds: the "
        f"others' rate beside it over without, {slow['ratio']} {slow['ratio_ci95']}; RSS "
        f"{slow['rss_growth_mb']:+} MB; "
        + "; ".join(
            f"{r['others_tok_s_with']} against {r['others_tok_s_without']} tok/s (paused after "
            f"{r['tokens_before_paused']} tokens, {r['slow_tokens_meanwhile']} of it meanwhile)"
            for r in slow["rounds"]
        ),
        f"four openai clients: Floodgate's server {peer['floodgate_tok_s']} tok/s in all, the "
        f"fourth's first token after {peer['floodgate_fourth_ttft_ms']} ms; {peer['server']} "
        f"{peer['peer_tok_s']} tok/s, after {peer['peer_fourth_ttft_ms']} ms",
    ]
    return ["", *lines]


def _speculative_lines(doc: dict[str, Any]) -> list[str]:
    section = doc.get("speculative")
    if not section:
        return []
    lines = [
        f"drafts from the context ({section['tokens']} tokens a reply, {section['threads']} "
        f"threads, {section['rounds']} rounds, flash attention for every loop):",
        "",
        "| prompts | with drafts over the native loop | over Floodgate's plain loop "
        "| kept of proposed | llama-cpp-python's prompt lookup over the native loop |",
        "| --- | --- | --- | --- | --- |",
    ]
    for kind in ("grounded", "open"):
        w = section[kind]
        lines.append(
            f"| {kind} | {w['ratio']} {w['ratio_ci95']} | {w['plain_ratio']} "
            f"{w['plain_ratio_ci95']} | {w['acceptance']} ({w['kept']} of {w['drafted']}) "
            f"| {w['peer_ratio']} {w['peer_ratio_ci95']} |"
        )
    pair = section.get("side_by_side")
    if pair:
        lines.append(
            f"| two that copy, side by side in one batch (over the same batch without drafts)"
            f" | {pair['ratio']} {pair['ratio_ci95']} | | {pair['acceptance']} "
            f"(same text: {'yes' if pair['same_text'] else 'no'}) | |"
        )
    prompts = section["same_text_prompts"]
    same = prompts - section["same_text_differ"]
    lines += [
        "",
        f"same text with drafts as without (prompts read in chunks of n_batch): {same} of"
        f" {prompts} replies ({section['same_text_with_drafts']} of them drafted,"
        f" {section['same_text_differ_drafted']} of those changed)",
        "the plain loop with its prompt in chunks sized by time, against chunks of n_batch:"
        f" {prompts - section['timed_chunks_differ']} of {prompts} replies the same",
    ]
    return ["", *lines]


def _vision_lines(doc: dict[str, Any]) -> list[str]:
    section = doc.get("vision")
    if not section:
        return []
    peer = section.get("peer", {})
    shape = section["projector"]
    lines = [
        f"pictures (the tests' projector: {shape['tokens_per_image']} positions a picture, "
        f"{shape['blocks']} blocks; a 1024 x 768 picture encoded in {section['encode_ms']} ms):",
        "",
        "| follow-up's first token | with a picture (ms) | without (ms) | ratio |",
        "| --- | --- | --- | --- |",
        f"| Floodgate | {section['follow_up_ms']} | {section['follow_up_text_only_ms']} "
        f"| {section['follow_up_ratio']} |",
    ]
    if "follow_up_ms" in peer:
        lines.append(
            f"| llama-cpp-python's MTMDChatHandler | {peer['follow_up_ms']} "
            f"| {peer['follow_up_text_only_ms']} | {peer['follow_up_ratio']} |"
        )
    else:
        lines.append(
            f"| llama-cpp-python's MTMDChatHandler | not measured: {peer.get('problem')} |"
        )
    sound = section.get("sound")
    if sound:
        lines.append(
            f"| Floodgate, a sound of {sound['seconds']} s (encoded in {sound['encode_ms']} ms)"
            f" | {sound['follow_up_ms']} | {sound['follow_up_text_only_ms']}"
            f" | {sound['follow_up_ratio']} |"
        )
    return ["", *lines]


def table(doc: dict[str, Any]) -> str:
    """The bench's figures against their targets, as Markdown tables and lines."""
    if "baselines" not in doc:  # one section alone (--only)
        only = next(key for key in doc if key != "machine")
        lines = _targets_table(doc, only + ".") + _server_lines(doc) + _download_lines(doc)
        lines += _parallel_lines(doc) + _speculative_lines(doc) + _vision_lines(doc)
        lines += _panel_alone_lines(doc) + _throughput_alone_lines(doc)
        lines += _window_cost_lines(doc) + _window_floor_lines(doc)
        return "\n".join(lines + _gpu_lines(doc))
    lines = _targets_table(doc)
    lines += ["", *_designs_table(doc)]
    lines += ["", *_summary_lines(doc)]
    lines += _threads_table(doc)
    lines += _window_cost_lines(doc)
    lines += _window_floor_lines(doc)
    lines += _server_lines(doc)
    lines += _parallel_lines(doc)
    lines += _speculative_lines(doc)
    lines += _vision_lines(doc)
    lines += _download_lines(doc)
    lines += _shapes_table(doc)
    lines += _large_table(doc)
    lines += _ttft_table(doc)
    lines += _gpu_lines(doc)
    return "\n".join(lines)


def _panel_alone_lines(doc: dict[str, Any]) -> list[str]:
    """The diagnostics panel's section run alone (the whole run says it in its summary)."""
    panel = doc.get("diagnostics_panel")
    if panel is None:
        return []
    return [
        "",
        f"diagnostics panel, replies alternating: tok/s hidden {panel['tok_s_hidden']}, shown "
        f"{panel['tok_s_shown']} (their medians' ratio {panel['ratio_of_medians']}; the pairs' "
        f"{panel['pairs']}); the UI thread's CPU per token hidden "
        f"{panel['ui_ms_per_token_hidden']} ms, shown {panel['ui_ms_per_token_shown']} ms; "
        f"the timeline redrawn {panel.get('timeline_redraws_per_s')} times a second at "
        f"{panel.get('timeline_ms_per_redraw')} ms each",
    ]


def _window_cost_lines(doc: dict[str, Any]) -> list[str]:
    """The window's cost beside its baselines (frames by a clock; decode threads at the UI's)."""
    cost = doc.get("window_cost")
    if cost is None:  # another section alone (--only)
        return []
    lines = [
        "",
        f"the window's cost, {cost['replies']} replies each way, alternating "
        f"({cost['decode_threads']} decode threads; medians, token to screen over every piece):",
        "| replies | cpu_share | UI ms per token | updates per s | token to screen p95 ms "
        "| loop lag p95 ms | decode_busy | tok/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows = [
        ("the app's (frames at a piece's arrival, decode threads below the UI)", cost),
        ("frames by the clock", cost["frames_on_clock"]),
    ]
    if "same_priority" in cost:  # measured where the bench may set a priority back up
        rows.append(("decode threads at the UI thread's priority", cost["same_priority"]))
    for name, row in rows:
        lines.append(
            f"| {name} | {row['cpu_share']} | {row['ui_ms_per_token']} | {row['updates_per_s']} "
            f"| {row['token_to_screen_ms_p95']} | {row['loop_lag_ms_p95']} "
            f"| {row['decode_busy']} | {row['tok_s']} |"
        )
    # 7/8: 1 - app.flow.pump.EARLY, written out (the report is read without Qt: make gpu-check).
    lines.append(
        "the least token to screen p95 any pacing of one update a frame could reach on the "
        f"app's replies' arrivals, knowing them in advance, updates costing nothing: "
        f"{cost['least_wait_ms_p95']} ms (with updates 7/8 of a frame apart, as the pump "
        f"allows: {cost['least_wait_ms_p95_pump_spacing']} ms)"
    )
    update = cost["update_cost"]
    lines.append(
        f"one update of the last reply ({update['updates']} of them, replayed in a chat view "
        f"of its own, the model idle; the UI thread's CPU): {update['back_to_back_ms']} ms "
        f"back to back, {update['a_frame_apart_ms']} ms a frame apart ({update['ratio']} times)"
    )
    return lines


def _window_floor_lines(doc: dict[str, Any]) -> list[str]:
    """The app's rate with all of its update, one line and none, over the native loop's."""
    floor = doc.get("window_floor")
    if floor is None or "app_ratio" not in floor:  # another section alone, or no round counted
        return []
    counts = ", ".join(map(str, floor["decode_threads"]))
    lines = [
        "",
        f"the window's floor, {floor['rounds']} rounds at {counts} decode threads "
        f"(the native loop {floor['native_tok_s']} tok/s; {floor['rounds_left_out']} rounds "
        "left out where the app's count moved):",
        "| the reply's text shown | tok/s | over the native loop |",
        "| --- | --- | --- |",
    ]
    for kind, name in (
        ("no_text", "nowhere (the pump and the status line only)"),
        ("one_line", "as one line of a plain label"),
        ("app", "in the chat view (the app)"),
    ):
        lines.append(
            f"| {name} | {floor[f'{kind}_tok_s']} | {floor[f'{kind}_ratio']} "
            f"{floor[f'{kind}_ratio_ci']} |"
        )
    return lines


def _gpu_lines(doc: dict[str, Any]) -> list[str]:
    """The GPU section's rates by layers offloaded, and its fit."""
    section = doc.get("gpu")
    if section is None:  # another section alone (--only)
        return []
    if not section.get("present"):
        return ["", f"gpu: none listed ({section.get('problem', 'no GPU')})"]
    lines = [
        "",
        f"gpu: {section['description']} ({section['device']}, {section['device_type']}), "
        f"{section['layers']} layers",
        "| layers on the GPU | prompt tok/s | decode tok/s |",
        "| --- | --- | --- |",
    ]
    for row in section["rates"].values():
        lines.append(f"| {row['layers']} | {row['prompt_tok_s']} | {row['decode_tok_s']} |")
    fit = section["fit"]
    lines.append(
        f"llama-cpp-python, every layer: {section['native_decode_tok_s']} tok/s decode; "
        f"fit: estimated {fit['estimate_bytes']} bytes, llama.cpp allocated "
        f"{fit['llama_cpp_allocated_bytes']}, the device reported {fit['device_reported_bytes']}"
    )
    return lines


def write_json(doc: dict[str, Any], path: Path) -> None:
    """Write the figures (NaN where a figure could not be measured)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, allow_nan=True) + "\n")
