#!/usr/bin/env python3
"""fault_server: a loopback OpenAI-compatible server that misbehaves on purpose,
for the remote engine's fault tests. The behaviour is the first path segment:
base URL http://127.0.0.1:PORT/MODE/v1. Modes:
  ok         streams 'Hello', ' world', '!' (one token per event), usage, [DONE]
  batch      the same text in one event of three tokens; usage says 3
  close      two chunks, then the connection is cut (chunked body never ended)
  eof        two chunks, then a clean end of body without finish or [DONE]
  stall      one chunk, then nothing for 30 s (the client's read timeout fires)
  401 / 403 / 404 / 500   that status with an OpenAI error body
  429        429 with Retry-After: 7
  429once    the first two requests get 429 with Retry-After: 1, then as ok
  malformed  a chunk that is not JSON
  auth       401 on every route unless 'Authorization: Bearer sekrit'
  tern       as ok, but /v1/models says owned_by tern and GET /tern/v1/tern/status
             answers (engine snapshot, 10 recent requests of 3 tenants)
  replay-NAME  the recorded stream fixtures/NAME-stream.sse (vllm, sglang, llamacpp)
  fast       FAST_TOKENS (128) one-token events as fast as the server writes them,
             each its own chunk and flush (the client's CPU per token, bench_client.sh)
  flood      FLOOD_TOKENS (40000, ~6 MB) one-token events, each written and flushed:
             more than socket buffers hold, so a client that stops reading blocks the
             server's writes; /flood/count tells how streams ended (done, or aborted:
             the client closed the connection), the longest single write's wait and
             how many events the last aborted stream had written
  emb-ok / emb-notjson / emb-strings / emb-base64 / emb-zeros / emb-two / emb-empty
             POST /v1/embeddings answers: [3, 4] unnormalised with usage 7; a body that
             is not JSON; strings for numbers; a base64 string; all zeros; two vectors
             for one input; no data
GET /MODE/count: {"posts": N, "done": N, "aborted": N, "blocked_s": S, "aborted_written": N}.
GET /MODE/metrics serves fixtures/MODE-1.prom, then MODE-2.prom (or MODE.prom).
Arguments: PORT [CERT KEY] (with a certificate: HTTPS). Prints 'PORT N' once listening. Runs until killed; every socket is bounded."""
import json, os, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "fault-model"
LOCK = threading.Lock()
H0 = {"count": 1, "mean": 0.01, "p50": 0.01, "p90": 0.01, "p99": 0.01, "max": 0.01}
# mode "tern": a /v1/tern/status in tern serve's shape, with 10 recent
# requests (newest first) from three tenants, one name carrying a terminal
# escape (untrusted text the client must not print raw).
TERN_STATUS = {"model": MODEL, "draining": False, "active_http": 0,
               "engine": {"kv": {"block_tokens": 16, "total": 64, "used": 3, "cached": 5,
                                 "free": 56},
                          "steps": 7, "busy_s": 1.0, "backend_s": 0.9, "sched_overhead": 0.1,
                          "goodput_rps": 0.5, "step_s": H0, "step_tokens": H0},
               "recent": [{"tenant": t, "request_id": "r%d" % i, "route": r, "status": st,
                           "queue_s": 0.001 * i, "ttft_s": tt, "e2e_s": 0.5 + i,
                           "prompt_tokens": 10 + i, "cached_tokens": i, "generated_tokens": 4}
                          for i, (t, r, st, tt) in enumerate([
                              ("editor", "/v1/chat/completions", "stop", 0.1),
                              ("nightly", "/v1/completions", "length", 0.9),
                              ("editor", "/v1/chat/completions", "cancelled", 0.3),
                              ("ev\x1b[31mil", "/v1/completions", "stop", 0.2),
                              ("editor", "/v1/chat/completions", "stop", 0.2),
                              ("nightly", "/v1/completions", "stop", 0.7),
                              ("editor", "/v1/chat/completions", "stop", 0.4),
                              ("nightly", "/v1/completions", "stop", 0.8),
                              ("editor", "/v1/chat/completions", "stop", 0.5),
                              ("editor", "/v1/chat/completions", "stop", 0.6)])]}
SCRAPES = {}


def chunk(text=None, finish=None, usage=None):
    c = {"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
         "choices": [] if usage else [{"index": 0, "delta": {} if text is None else {"content": text},
                                        "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return "data: " + json.dumps(c) + "\n\n"


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60

    def log_message(self, *a):
        pass

    def mode(self):
        parts = self.path.strip("/").split("/")
        return parts[0] if parts else "ok", "/" + "/".join(parts[1:])

    def send_json(self, code, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def error(self, code, msg, extra=None):
        self.send_json(code, {"error": {"message": msg, "type": "test_error", "code": code}}, extra)

    def authorized(self, mode):
        return mode != "auth" or self.headers.get("Authorization") == "Bearer sekrit"

    def do_GET(self):
        mode, rest = self.mode()
        if not self.authorized(mode):
            return self.error(401, "invalid api key")
        if rest == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "owned_by": "tern" if mode == "tern" else "fault",
                 "context_length": 4096}]})
        if rest == "/v1/tern/status" and mode == "tern":
            return self.send_json(200, TERN_STATUS)
        if rest == "/health":
            return self.send_json(200, {"status": "ok"})
        if rest == "/count":  # how many completion POSTs this mode got (retry tests)
            with LOCK:
                return self.send_json(200, {"posts": SCRAPES.get("post:" + mode, 0),
                                            "done": SCRAPES.get("done:" + mode, 0),
                                            "aborted": SCRAPES.get("aborted:" + mode, 0),
                                            "blocked_s": SCRAPES.get("blocked:" + mode, 0.0),
                                            "aborted_written": SCRAPES.get("written:" + mode, -1)})
        if rest == "/metrics":
            # MODE-1.prom on the first scrape, MODE-2.prom after (an interval
            # with new samples), else MODE.prom.
            with LOCK:
                SCRAPES[mode] = SCRAPES.get(mode, 0) + 1
                k = SCRAPES[mode]
            p = os.path.join(HERE, "fixtures", "%s-%d.prom" % (mode, 1 if k == 1 else 2))
            if not os.path.exists(p):
                p = os.path.join(HERE, "fixtures", mode + ".prom")
            if os.path.exists(p):
                body = open(p, "rb").read()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return self.wfile.write(body)
        return self.error(404, "no route " + rest)

    def write_chunk(self, s):
        b = s.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        self.wfile.flush()

    def embeddings(self, mode):
        one = lambda v: {"object": "embedding", "index": 0, "embedding": v}
        bodies = {
            "emb-ok": {"object": "list", "data": [one([3, 4])], "model": MODEL,
                       "usage": {"prompt_tokens": 7, "total_tokens": 7}},
            "emb-strings": {"object": "list", "data": [one(["3", "4"])]},
            "emb-base64": {"object": "list", "data": [one("AABAQAAAgEA=")]},
            "emb-zeros": {"object": "list", "data": [one([0, 0, 0])]},
            "emb-two": {"object": "list", "data": [one([1, 0]), one([0, 1])]},
            "emb-empty": {"object": "list", "data": []},
        }
        text = b"{not json" if mode == "emb-notjson" else json.dumps(bodies[mode]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def do_POST(self):
        mode, rest = self.mode()
        with LOCK:
            SCRAPES["post:" + mode] = SCRAPES.get("post:" + mode, 0) + 1
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(min(n, 1 << 20))
        if not self.authorized(mode):
            return self.error(401, "invalid api key")
        if rest.endswith("/embeddings") and mode.startswith("emb-"):
            return self.embeddings(mode)
        if not rest.endswith("/completions"):
            return self.error(404, "no route " + rest)
        try:
            json.loads(body)
        except ValueError:
            return self.error(400, "bad json")
        if mode in ("401", "403", "404", "500"):
            return self.error(int(mode), "the server says no (%s)" % mode)
        if mode == "429":
            return self.error(429, "too many requests", {"Retry-After": "7"})
        if mode == "429once":  # the first two requests are told to come back in 1 s
            with LOCK:
                SCRAPES["429once"] = SCRAPES.get("429once", 0) + 1
                k = SCRAPES["429once"]
            if k <= 2:
                return self.error(429, "busy, retry", {"Retry-After": "1"})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if mode.startswith("replay-"):  # a recorded stream, byte for byte
            p = os.path.join(HERE, "fixtures", mode[7:] + "-stream.sse")
            self.write_chunk(open(p, newline="").read())
            self.wfile.write(b"0\r\n\r\n")
            return
        usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                 "prompt_tokens_details": {"cached_tokens": 2}}
        if mode == "malformed":
            self.write_chunk(chunk("Hel"))
            self.write_chunk("data: {this is not json\n\n")
            time.sleep(5)
            return
        if mode == "flood":  # a slow reader seen from the server: its writes block
            longest, t, written = 0.0, time.monotonic(), 0
            try:
                for i in range(int(os.environ.get("FLOOD_TOKENS", "40000"))):
                    written, t = i, time.monotonic()
                    self.write_chunk(chunk(" tok"))
                    longest = max(longest, time.monotonic() - t)
                self.write_chunk("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                end = "done:"
            except (BrokenPipeError, ConnectionResetError):  # the write that failed waited too
                longest = max(longest, time.monotonic() - t)
                end = "aborted:"
                self.close_connection = True
            with LOCK:
                SCRAPES[end + mode] = SCRAPES.get(end + mode, 0) + 1
                SCRAPES["blocked:" + mode] = max(SCRAPES.get("blocked:" + mode, 0.0), longest)
                if end == "aborted:":
                    SCRAPES["written:" + mode] = written
            return
        if mode == "fast":
            n = int(os.environ.get("FAST_TOKENS", "128"))
            for i in range(n):
                self.write_chunk(chunk(" tok"))
            usage = {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": 5 + n}
        elif mode == "batch":
            self.write_chunk(chunk("Hello world!"))
        else:
            self.write_chunk(chunk("Hello"))
            if mode == "stall":
                time.sleep(30)
                return
            time.sleep(0.05)
            self.write_chunk(chunk(" world"))
            if mode == "close":
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            if mode == "eof":
                self.wfile.write(b"0\r\n\r\n")
                self.close_connection = True
                return
            self.write_chunk(chunk("!"))
        self.write_chunk(chunk(None, "stop"))
        self.write_chunk(chunk(usage=usage))
        self.write_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")


class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # many concurrent streams connect at once (the default is 5)
    daemon_threads = True


def main():
    srv = Server(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), H)
    if len(sys.argv) > 3:  # PORT CERT KEY: HTTPS with that (self-signed) certificate
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("PORT", srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
