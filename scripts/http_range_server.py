"""A static HTTP file server with byte-range support (RFC 7233 single ranges), for the
remote tests: Python's http.server ignores Range headers, which real servers (nginx, S3
website endpoints, CDNs) honour and sharded zarr reads rely on.

    python scripts/http_range_server.py --bind 127.0.0.1 --directory fixtures/data PORT
"""
import argparse
import functools
import http.server
import os
import re


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        if not m or (m.group(1) == "" and m.group(2) == ""):
            self.send_error(416, "unsupported range")
            return None
        if m.group(1) == "":  # suffix range: the last N bytes
            start, end = max(0, size - int(m.group(2))), size - 1
        else:
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        if start >= size or start > end:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.end_headers()
            return None
        f = open(path, "rb")
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        remaining = getattr(self, "_remaining", None)
        if remaining is None:
            return super().copyfile(source, outputfile)
        outputfile.write(source.read(remaining))
        self._remaining = None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--directory", default=".")
    p.add_argument("port", type=int)
    a = p.parse_args()
    handler = functools.partial(RangeHandler, directory=a.directory)
    http.server.ThreadingHTTPServer((a.bind, a.port), handler).serve_forever()


if __name__ == "__main__":
    main()
