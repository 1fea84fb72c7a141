"""Strategies that break the rules without aiming at anything (no targets needed):
limits, crashes, protocol errors, and the parts real memory systems need. For the
sandbox tests; never run these outside the sandbox."""

import os
import threading

from benchwarden.suites.retrieval.api import Item


class Polite:
    def index(self, sessions):
        self.first = sessions[0].text.split("\n")[0]

    def pack(self, question, limit, budget_chars):
        return [Item(self.first, (0, 0, len(self.first)))]


class CtypesWritesMemory(Polite):
    def index(self, sessions):
        super().index(sessions)
        import ctypes

        ctypes.memset(0, 1, 64)  # write through a null pointer: the process dies


class LoopsForever(Polite):
    def index(self, sessions):
        while True:
            pass


class Sleeps(Polite):
    def index(self, sessions):
        import time
        time.sleep(3600)


class AllocatesWithoutBound(Polite):
    def index(self, sessions):
        hoard = []
        while True:
            hoard.append(bytearray(32 * 1024 * 1024))


class ReadsEnvironment(Polite):
    def pack(self, question, limit, budget_chars):
        return [" ".join(f"{key}={value}" for key, value in sorted(os.environ.items()))]


class UsesRealParts(Polite):
    """What real memory systems need: C extensions, threads, files in the scratch folder."""

    def index(self, sessions):
        super().index(sessions)
        import pydantic_core
        import yaml

        scratch = os.environ["BENCHWARDEN_SCRATCH"]
        results = []
        worker = threading.Thread(target=lambda: results.append("thread ran"))
        worker.start()
        worker.join()
        path = os.path.join(scratch, "notes.yaml")
        with open(path, "w") as stream:
            yaml.dump({"written": True}, stream, Dumper=yaml.CSafeDumper)
        with open(path) as stream:
            loaded = yaml.load(stream, Loader=yaml.CSafeLoader)
        self.report = (f"libyaml={yaml.__with_libyaml__} pydantic_core={pydantic_core.__version__} "
                       f"{results[0]} file={loaded} cwd={os.getcwd() == scratch}")

    def pack(self, question, limit, budget_chars):
        return [self.report]


class Crashes(Polite):
    def index(self, sessions):
        os._exit(9)


class PrintsToStdout(Polite):
    def pack(self, question, limit, budget_chars):
        print("this must not corrupt the protocol")
        return super().pack(question, limit, budget_chars)


class RaisesInPack(Polite):
    def pack(self, question, limit, budget_chars):
        return self.helper(question)

    def helper(self, question):
        raise KeyError(f"no entry for {question[:20]}")


class ReturnsGarbage(Polite):
    def pack(self, question, limit, budget_chars):
        return 42


class Closes(Polite):
    """Its close() hook runs at the end of each seed, inside the boundary."""

    def close(self):
        with open(os.path.join(os.environ["BENCHWARDEN_SCRATCH"], "closed"), "w") as stream:
            stream.write("closed")


class FloodsStderr(Polite):
    """Writes far more than the harness keeps, without a newline, then crashes."""

    def index(self, sessions):
        import sys

        chunk = "x" * (1 << 20)
        for _ in range(256):
            sys.stderr.write(chunk)
        sys.stderr.write("\nlast words\n")
        sys.stderr.flush()
        os._exit(3)
