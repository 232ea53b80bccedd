"""Submit-and-wait round trips from Python, chime against Celery, one sitting, one machine.

    python roundtrip.py chime  [--n 200] [--many 1000]     # CHIME_API_URL: a running `chime up`
    python roundtrip.py celery [--n 200] [--many 1000]     # CELERY_BROKER_URL: RabbitMQ; a worker
                                                           # of this module runs meanwhile

chime: `client.submit("noop").wait()` n times one after another (p50/p99 of each round trip),
then `submit_many` of `many` noop tasks + `wait_all`. Celery 5: `noop.delay().get()` with the
rpc:// result backend (replies over RabbitMQ, Celery's fastest), then `many` `delay()` calls and
each `get()`. Prints one line each: `<peer> roundtrip_p50_ms=… roundtrip_p99_ms=… many=… many_s=…`.
"""

import argparse
import os
import sys
import time


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def celery_app():
    from celery import Celery

    app = Celery(
        "roundtrip",
        broker=os.environ.get("CELERY_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//"),
        backend="rpc://",
    )
    app.conf.task_default_queue = "roundtrip"
    app.conf.worker_prefetch_multiplier = 4

    @app.task(name="roundtrip.noop")
    def noop():
        return None

    return app, noop


def run_chime(n, many):
    import chime

    client = chime.Client()
    client.submit("noop").wait(timeout=60)  # warm-up
    times = []
    for _ in range(n):
        start = time.perf_counter()
        client.submit("noop").wait(timeout=60)
        times.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    client.wait_all(client.submit_many({"kind": "noop"} for _ in range(many)), timeout=600)
    return times, time.perf_counter() - start


def run_celery(n, many):
    _, noop = celery_app()
    noop.delay().get(timeout=60)  # warm-up
    times = []
    for _ in range(n):
        start = time.perf_counter()
        noop.delay().get(timeout=60)
        times.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    results = [noop.delay() for _ in range(many)]
    for result in results:
        result.get(timeout=600)
    return times, time.perf_counter() - start


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        app, _ = celery_app()
        app.worker_main(["worker", "--loglevel=WARNING", "--pool=prefork", "--concurrency=2"])
        sys.exit(0)
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=["chime", "celery"])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--many", type=int, default=1000)
    args = parser.parse_args()
    times, many_s = (run_chime if args.peer == "chime" else run_celery)(args.n, args.many)
    print(
        f"{args.peer} roundtrip_p50_ms={percentile(times, 50):.1f} "
        f"roundtrip_p99_ms={percentile(times, 99):.1f} n={args.n} many={args.many} "
        f"many_s={many_s:.2f}"
    )
