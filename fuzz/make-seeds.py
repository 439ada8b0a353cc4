#!/usr/bin/env python3
"""Writes the committed seed corpus of every fuzz target into fuzz/seeds/<target>/.

Seeds are small, valid (and a few hostile) inputs that get each fuzzer past the first layer
of its format at once. Run it again after changing it; the files are committed, and
scripts/fuzz copies them into the working corpus (fuzz/corpus/, not committed).
"""

import io
import json
import os
import shutil
import struct
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
REPO = os.path.dirname(HERE)


def write(target, name, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


POD_JSON = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {
                "name": "web",
                "image": "busybox:1.35",
                "command": ["httpd", "-f"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "resources": {
                    "limits": {"cpu": "250m", "memory": "32Mi"},
                    "requests": {"cpu": "100m", "memory": "16Mi"},
                },
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}},
                "env": [{"name": "A", "value": "$(B)"}],
                "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}},
            }
        ],
        "volumes": [{"name": "data", "hostPath": {"path": "/srv", "type": "Directory"}}],
    },
}


def manifest_seeds():
    with open(os.path.join(REPO, "manifests", "hello.yaml")) as f:
        write("manifest", "hello.yaml", f.read())
    write("manifest", "pod.json", json.dumps(POD_JSON))
    write(
        "manifest",
        "podlist.json",
        json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [POD_JSON]}),
    )
    write(
        "manifest",
        "multi.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n"
        "  - {name: c, image: busybox}\n---\napiVersion: v1\nkind: Pod\n"
        "metadata: {name: b, namespace: kube-system}\nspec:\n  hostNetwork: true\n"
        "  containers:\n  - name: c\n    image: busybox@sha256:" + "a" * 64 + "\n",
    )
    # Billion laughs: each alias level multiplies the expansion by ten.
    lol = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    prev = "a"
    for i in range(1, 9):
        name = chr(ord("a") + i)
        lol += f"{name}: &{name} [" + ", ".join(f"*{prev}" for _ in range(10)) + "]\n"
        prev = name
    write("manifest", "alias-bomb.yaml", lol)
    write("manifest", "deep-flow.yaml", "[" * 3000 + "]" * 3000)
    write("manifest", "deep-block.yaml", "".join(" " * i + "- \n" for i in range(300)))
    write("manifest", "deep-json.json", '{"a":' * 2000 + "1" + "}" * 2000)


def kubelet_config_seeds():
    with open(os.path.join(REPO, "tests", "vm", "kubelet-config.yaml")) as f:
        write("kubelet_config", "vm.yaml", f.read())
    write(
        "kubelet_config",
        "full.yaml",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "staticPodPath: /etc/kubernetes/manifests\nstaticPodURL: http://10.0.0.1/pods\n"
        "staticPodURLHeader:\n  Authorization: [Bearer x]\nfileCheckFrequency: 20s\n"
        "httpCheckFrequency: 1m30s\nsyncFrequency: 0s\ncontainerLogMaxSize: 10Mi\n"
        "containerLogMaxFiles: 5\npodPidsLimit: 1024\ncgroupRoot: /podvisor\n"
        "systemReserved: {cpu: 100m, memory: 100Mi}\nkubeReserved: {memory: 5%}\n"
        "evictionHard:\n  memory.available: 5%\n  nodefs.available: 10%\n"
        "imageGCHighThresholdPercent: 85\nimageGCLowThresholdPercent: 80\n"
        "imageMinimumGCAge: 2m\nclusterDNS: [10.96.0.10]\n",
    )
    write(
        "kubelet_config",
        "config.json",
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "podPidsLimit": -1,
                "containerLogMaxSize": "1Gi",
            }
        ),
    )


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for info, data in entries:
            t.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def ti(name, kind=tarfile.REGTYPE, data=b"", link="", mode=0o644, pax=None, dev=(0, 0)):
    i = tarfile.TarInfo(name)
    i.type = kind
    i.mode = mode
    i.mtime = 1700000000
    i.linkname = link
    i.devmajor, i.devminor = dev
    if pax:
        i.pax_headers = pax
    if kind == tarfile.REGTYPE:
        i.size = len(data)
        return (i, data)
    return (i, None)


def layer_unpack_seeds():
    write(
        "layer_unpack",
        "basic.tar",
        tar_bytes(
            [
                ti("./", tarfile.DIRTYPE, mode=0o755),
                ti("etc/", tarfile.DIRTYPE, mode=0o755),
                ti("etc/hello", data=b"hello\n"),
                ti("bin/", tarfile.DIRTYPE, mode=0o755),
                ti("bin/sh", data=b"#!\n", mode=0o4755),
                ti("bin/ash", tarfile.LNKTYPE, link="bin/sh"),
                ti("bin/busybox", tarfile.SYMTYPE, link="sh"),
                ti("dev/", tarfile.DIRTYPE),
                ti("dev/null", tarfile.CHRTYPE, dev=(1, 3)),
                ti("dev/fifo", tarfile.FIFOTYPE),
                ti("etc/xattr", data=b"x", pax={"SCHILY.xattr.user.k": "v"}),
            ]
        ),
    )
    write(
        "layer_unpack",
        "whiteouts.tar",
        tar_bytes(
            [
                ti("etc/", tarfile.DIRTYPE),
                ti("etc/.wh..wh..opq", data=b""),
                ti("etc/.wh.hello", data=b""),
                ti("etc/hello", data=b"again\n"),
            ]
        ),
    )
    # Escape attempts: the fuzz target's canary lives in ../../podvisor-fuzz-outside and at
    # /dev/shm/podvisor-fuzz-outside.
    outside = "/dev/shm/podvisor-fuzz-outside"
    write(
        "layer_unpack",
        "escape-symlink.tar",
        tar_bytes(
            [
                ti("up", tarfile.SYMTYPE, link="../../podvisor-fuzz-outside"),
                ti("up/canary", data=b"pwned\n"),
                ti("abs", tarfile.SYMTYPE, link=outside),
                ti("abs/canary", data=b"pwned\n"),
                ti("abs/dir/", tarfile.DIRTYPE),
                ti("abs/new", data=b"pwned\n"),
            ]
        ),
    )
    write(
        "layer_unpack",
        "escape-hardlink.tar",
        tar_bytes(
            [
                ti("abs", tarfile.SYMTYPE, link=outside),
                ti("link", tarfile.LNKTYPE, link="abs/canary"),
                ti("up", tarfile.LNKTYPE, link="../../podvisor-fuzz-outside/canary"),
                ti("link2", tarfile.LNKTYPE, link=outside + "/canary"),
            ]
        ),
    )
    write(
        "layer_unpack",
        "escape-dotdot.tar",
        tar_bytes([ti("../sibling", data=b"x"), ti("a/../../b", data=b"x")]),
    )
    write(
        "layer_unpack",
        "long-names.tar",
        tar_bytes(
            [
                ti("d" * 120 + "/", tarfile.DIRTYPE),
                ti("d" * 120 + "/" + "f" * 200, data=b"long"),
                ti("l", tarfile.SYMTYPE, link="t" * 300),
            ]
        ),
    )


def api_request_seeds():
    for name, line in [
        ("pods", "GET /pods HTTP/1.1"),
        ("pod", "GET /pods/default/hello-node HTTP/1.1"),
        ("logs", "GET /pods/default/hello/log?container=web&tail=10&previous=true&follow=true HTTP/1.0"),
        ("events", "GET /events?pod=kube-system%2Fetcd HTTP/1.1"),
        ("stats", "GET /stats?pod=hello HTTP/1.1"),
        ("errors", "GET /source-errors HTTP/1.1"),
        ("healthz", "GET /healthz HTTP/1.1"),
        ("post", "POST /pods HTTP/1.1"),
    ]:
        write("api_request", name, line + "\r\nHost: podvisor\r\nUser-Agent: curl/7.88\r\n\r\n")
    write("api_request", "bare-lf", "GET /pods HTTP/1.1\nHost: x\n\n")


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    out = b"\x00"
    for s in (name, value):
        b = s.encode()
        assert len(b) < 127
        out += bytes([len(b)]) + b
    return out


def grpc_response_seeds():
    settings = frame(4, 0, 0, b"\x00\x03\x00\x00\x00\x64")
    ping = frame(6, 0, 0, b"\x01" * 8)
    headers = frame(1, 4, 1, b"\x88" + hpack_literal("content-type", "application/grpc"))
    data = frame(0, 0, 1, b"\x00\x00\x00\x00\x02\x08\x01")
    trailers = frame(1, 5, 1, hpack_literal("grpc-status", "0"))
    write("grpc_response", "serving", settings + ping + headers + data + trailers)
    write(
        "grpc_response",
        "not-serving",
        settings + headers + frame(0, 0, 1, b"\x00\x00\x00\x00\x02\x08\x02") + trailers,
    )
    write(
        "grpc_response",
        "unimplemented",
        settings
        + frame(
            1,
            5,
            1,
            b"\x88" + hpack_literal("grpc-status", "12") + hpack_literal("grpc-message", "no"),
        ),
    )
    # Padded and priority HEADERS, then CONTINUATION.
    block = b"\x88" + hpack_literal("content-type", "application/grpc")
    padded = frame(1, 0x8 | 0x20, 1, b"\x02" + b"\x00\x00\x00\x00\x10" + block[:5] + b"\x00\x00")
    cont = frame(9, 4, 1, block[5:])
    write("grpc_response", "padded-continuation", settings + padded + cont + data + trailers)
    write("grpc_response", "goaway", frame(7, 0, 0, b"\x00" * 8))
    # Raw HPACK blocks (0xff prefix): RFC 7541 C.4 (Huffman, dynamic table) and C.3.
    c4 = [
        "828684418cf1e3c2e5f23a6ba0ab90f4ff",
        "828684be5886a8eb10649cbf",
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
    ]
    write("grpc_response", "hpack-rfc-c4", b"\xff" + b"\xfe".join(bytes.fromhex(h) for h in c4))
    c3 = [
        "828684410f7777772e6578616d706c652e636f6d",
        "828684be58086e6f2d6361636865",
        "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
    ]
    write("grpc_response", "hpack-rfc-c3", b"\xff" + b"\xfe".join(bytes.fromhex(h) for h in c3))
    write("grpc_response", "hpack-table-size", b"\xff" + bytes.fromhex("3fe11f") + b"\xfe" + bytes.fromhex("20"))


def digest(b):
    import hashlib

    return "sha256:" + hashlib.sha256(b).hexdigest()


def registry_manifest_seeds():
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": "2024-01-01T00:00:00Z",
            "config": {"Cmd": ["sh"]},
            "rootfs": {"type": "layers", "diff_ids": [digest(b"layer0"), digest(b"layer1")]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest(b"blob0"),
                    "size": 100,
                },
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar+zstd",
                    "digest": digest(b"blob1"),
                    "size": 200,
                },
            ],
        }
    ).encode()
    write("registry_manifest", "oci-manifest", b"\x02" + manifest + b"\x00" + config)
    write("registry_manifest", "untyped-manifest", b"\x00" + manifest + b"\x00" + config)
    docker = json.loads(manifest)
    docker["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json"
    docker["config"]["mediaType"] = "application/vnd.docker.container.image.v1+json"
    for l in docker["layers"]:
        l["mediaType"] = "application/vnd.docker.image.rootfs.diff.tar.gzip"
    write("registry_manifest", "docker-manifest", b"\x04" + json.dumps(docker).encode() + b"\x00" + config)
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": digest(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": a, "os": "linux", **({"variant": v} if v else {})},
                }
                for a, v in [("amd64", None), ("arm64", "v8"), ("arm", "v7"), ("arm", "v6"), ("ppc64le", None)]
            ],
        }
    ).encode()
    write("registry_manifest", "oci-index", b"\x01" + index)
    write("registry_manifest", "oci-index-arm", b"\x81" + index)
    write("registry_manifest", "untyped-index", b"\x00" + index)


def www_authenticate_seeds():
    for name, value in [
        ("dockerhub", 'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"'),
        ("basic", 'Basic realm="Registry Realm"'),
        ("unquoted", "bearer realm=http://x/t, service=svc"),
        ("ghcr", 'Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:user/image:pull",error="insufficient_scope"'),
        ("negotiate", "Negotiate abc"),
    ]:
        write("www_authenticate", name, value)


def cri_log_seeds():
    # First byte: where the input is split between the rotated and the current file.
    log = (
        b"2016-10-06T00:17:09.669794202Z stdout F hello\n"
        b"2016-10-06T00:17:09.669794203Z stderr P part one \n"
        b"2016-10-06T00:17:10.000000000Z stdout P partial \n"
        b"2016-10-06T00:17:10.100000000Z stderr F part two\n"
        b"2016-10-06T00:17:10.200000000Z stdout F end\n"
        b"not a record\n"
        b"2016-10-06T00:17:11Z stdout F no fraction\n"
        b"2016-10-06T00:17:11.1+02:00 stdout F offset\n"
        b"2016-10-06T00:17:12.000000000Z stdout F unterminated"
    )
    write("cri_log", "mixed", b"\x80" + log)
    write("cri_log", "all-current", b"\x00" + log)


def apiserver_response_seeds():
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "etcd-edge1", "namespace": "kube-system", "uid": "0b1c", "resourceVersion": "42",
            "annotations": {"kubernetes.io/config.mirror": "h", "kubernetes.io/config.hash": "h"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "edge1", "uid": "n1", "controller": True}],
        },
        "spec": {"nodeName": "edge1", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort", "reason": "Old",
                   "conditions": [{"type": "DisruptionTarget", "status": "True"}, {"type": "Ready", "status": "False"}]},
    }
    write("apiserver_response", "mirror-pod", json.dumps(pod))
    write("apiserver_response", "watch-event", json.dumps({"type": "MODIFIED", "object": pod}))
    write("apiserver_response", "pod-list", json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": [pod, {"metadata": 3}]}))
    write("apiserver_response", "node", json.dumps({"kind": "Node", "metadata": {"name": "edge1", "uid": "n1"},
        "status": {"conditions": [{"type": "KernelDeadlock", "status": "False"}, {"type": "Ready", "status": "Unknown"}]}}))
    write("apiserver_response", "lease", json.dumps({"kind": "Lease", "metadata": {"name": "edge1", "resourceVersion": "3", "ownerReferences": "odd"},
        "spec": {"holderIdentity": "edge1", "renewTime": "2026-01-01T00:00:00.000000Z"}}))
    write("apiserver_response", "status-410", json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}))


def main():
    if os.path.isdir(SEEDS):
        shutil.rmtree(SEEDS)
    manifest_seeds()
    kubelet_config_seeds()
    layer_unpack_seeds()
    api_request_seeds()
    grpc_response_seeds()
    registry_manifest_seeds()
    www_authenticate_seeds()
    cri_log_seeds()
    apiserver_response_seeds()


if __name__ == "__main__":
    main()
