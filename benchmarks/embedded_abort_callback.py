"""The cost of the embedded backend's abort callback (issue 17): llama.cpp calls it
between graph nodes of every decode, through ctypes and the GIL. Prompt evaluation and
generation of SmolLM2-135M with the callback set, beside the same with none, alternated
in one run; prints JSON lines (needs the extra tether[local]).

    nice -n 10 .venv/bin/python benchmarks/embedded_abort_callback.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from tether.llm.embedded import default_model_path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    import llama_cpp

    model: Any = llama_cpp.Llama(
        model_path=str(default_model_path()), n_ctx=2048, n_threads=2, seed=1, verbose=False
    )
    flag = threading.Event()
    callbacks = {
        "none": llama_cpp.ggml_abort_callback(),
        "callback": llama_cpp.ggml_abort_callback(lambda _data: flag.is_set()),
    }
    prompt = model.tokenize(b"Write a long story about a lighthouse keeper and the sea. " * 20)
    evals: dict[str, list[float]] = {k: [] for k in callbacks}
    rates: dict[str, list[float]] = {k: [] for k in callbacks}
    for _ in range(args.rounds):
        for name, callback in callbacks.items():
            llama_cpp.llama_set_abort_callback(model._ctx.ctx, callback, None)
            model.reset()
            began = time.perf_counter()
            model.eval(prompt)
            evals[name].append(time.perf_counter() - began)
            began = time.perf_counter()
            out = model.create_completion(prompt, max_tokens=96, temperature=0)
            rates[name].append(out["usage"]["completion_tokens"] / (time.perf_counter() - began))
    model.close()
    for name in callbacks:
        common = {"abort_callback": name, "prompt_tokens": len(prompt), "rounds": args.rounds}
        print(
            json.dumps(
                {"figure": "prompt_eval_s", "value": round(statistics.median(evals[name]), 3)}
                | common
            )
        )
        print(
            json.dumps(
                {"figure": "generate_tok_per_s", "value": round(statistics.median(rates[name]), 1)}
                | common
            )
        )


if __name__ == "__main__":
    main()
