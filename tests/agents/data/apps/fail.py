"""One failing program, many ways to fail (see README.md). Usage: fail.py MODE [SITE]."""

import sys
import threading

MODE = sys.argv[1]
SITE = sys.argv[2] if len(sys.argv) > 2 else "a"


def load_config(cfg):
    return cfg["learning_rate"]


def site_a(x):
    return 1 / x


def site_b(x):
    return [1, 2, 3][x + 10]


def step(x):
    return site_a(x) if SITE == "a" else site_b(x)


def work(x):
    return step(x - x)


def main():
    print("starting", MODE, SITE, flush=True)
    if MODE == "raise":
        work(3)
    elif MODE == "chained":
        try:
            load_config({})
        except KeyError as exc:
            raise ValueError("config has no learning rate") from exc
    elif MODE == "context":
        try:
            load_config({})
        except KeyError:
            work(1)
    elif MODE == "thread":
        t = threading.Thread(target=work, args=(5,), name="loader-7")
        t.start()
        t.join()
        print("main thread goes on", flush=True)
    elif MODE == "pool":
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(2) as pool:
            pool.map(work, [1, 2])
    elif MODE == "futures":
        import concurrent.futures
        import multiprocessing

        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as ex:
            ex.submit(work, 1).result()
    elif MODE == "memory":
        hoard = []
        while True:
            hoard.append(bytearray(16 << 20))
    elif MODE == "segv":
        import ctypes
        import faulthandler

        faulthandler.enable()
        ctypes.string_at(0)
    elif MODE == "abort":
        import os

        os.abort()
    elif MODE == "flood":
        import traceback

        for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 50):
            try:
                work(2)
            except ZeroDivisionError:
                traceback.print_exc()
        raise SystemExit(3)
    elif MODE == "cuda_oom":
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; "
                           "781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by PyTorch)")
    elif MODE == "exit":
        raise SystemExit(int(SITE))


if __name__ == "__main__":
    main()
