#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets into fuzz/seeds/<target>/:
well-formed inputs, so the fuzzers start past each decoder's front door.
Run from the repository root: python3 fuzz/make_seeds.py"""
import hashlib, io, json, os, struct, tarfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def tar_of(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 0
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, data
                t.addfile(ti)
            elif kind == "link":
                ti.type, ti.linkname = tarfile.LNKTYPE, data
                t.addfile(ti)
            else:
                ti.size, ti.mode = len(data), 0o644
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


layer = tar_of([("etc", "dir", None), ("etc/passwd", "file", b"root:x:0:0::/root:/bin/sh\n"),
                ("etc/group", "file", b"root:x:0:\n"), ("bin", "dir", None),
                ("bin/sh", "file", b"#!sh\n"), ("bin/ln", "link", "bin/sh"),
                ("usr", "sym", "."), ("etc/.wh.gone", "file", b""), ("etc/.wh..wh..opq", "file", b"")])
put("layer_tar", "layer.tar", layer)
put("layer_tar", "escape.tar", tar_of([("a", "sym", "../beside"), ("a/x", "file", b"x")]))

sha = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()
config = json.dumps({"architecture": "amd64", "os": "linux",
                     "config": {"Env": ["PATH=/bin"], "User": "root", "WorkingDir": "/"},
                     "rootfs": {"type": "layers", "diff_ids": [sha(layer)]}}).encode()
manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": sha(config), "size": len(config)},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                   "digest": sha(layer), "size": len(layer)}]}).encode()
index = json.dumps({"schemaVersion": 2, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(manifest),
     "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "seed"}}]}).encode()
blob = lambda b: "blobs/sha256/" + hashlib.sha256(b).hexdigest()
put("image_import", "oci.tar", tar_of([
    ("oci-layout", "file", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", "file", index),
    ("blobs", "dir", None), ("blobs/sha256", "dir", None), (blob(config), "file", config),
    (blob(manifest), "file", manifest), (blob(layer), "file", layer)]))
docker = json.dumps([{"Config": "config.json", "RepoTags": ["seed:latest"], "Layers": ["layer.tar"]}]).encode()
put("image_import", "docker.tar", tar_of([("manifest.json", "file", docker),
                                          ("config.json", "file", config), ("layer.tar", "file", layer)]))


def frame(v):
    b = json.dumps(v).encode()
    return struct.pack("<I", len(b)) + b


put("helper_protocol", "requests", frame({"type": "unshare"}) + frame({"type": "shutdown"}) +
    frame({"type": "unmount_workspace"}) + frame({"type": "file", "op": "read", "path": "a/b"}) +
    frame({"type": "egress", "socket": "/run/x.sock", "port": 8080}))
put("session_state", "dump", b"/workspace/src\0declare -x HOME=\"/root\"\ndeclare -x MULTI=$'a\\nb'\n"
    b"declare -x PWD=\"/x\"\ndeclare -- plain=\"v\"\ndeclare -ax arr=([0]=\"a\")\n")
put("session_state", "status", b"exit 0\n")

# The bundled tasks' task.toml files are seeds too; fuzz/run copies them
# from envs/tasks at each run rather than keeping copies here.
put("task_toml", "manifest.toml", b'[splits]\ntrain = []\ntest = []\n')

put("refs", "tag", "base\n" + "ab" * 32 + "\n")
put("refs", "prefix", "abcd\n")
put("request_bodies", "exec", b"\x00" + json.dumps({"command": "echo hi", "timeout_s": 5}).encode())
put("request_bodies", "path", b"\x01/workspace/a/./b")
put("request_bodies", "archive", b"\x02" + tar_of([("d", "dir", None), ("d/f", "file", b"x"), ("l", "sym", "d/f")]))

tree = json.dumps({"entries": [{"path": "a", "kind": {"file": {"hash": "00" * 32, "size": 1}}, "mode": 420}]}).encode()
put("store_decoders", "tree", b"\x02" + tree)
put("store_decoders", "blob", b"\x01hello")
put("store_decoders", "pages", b"\x00arbor-wasm-mem1\0" + struct.pack("<Q", 1) + b"\x11" * 32)
put("object_file", "blob", b"ARBO\x01\x01" + struct.pack("<Q", 2) + b"hi")
print("seeds written to", ROOT)
