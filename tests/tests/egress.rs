//! Egress by allowlist, against the real package index: `pip install`
//! succeeds in a sandbox allowed exactly pip's index hosts (read from pip
//! inside the sandbox at run time), the same sandbox cannot reach any other
//! name, an IP literal or the network directly, and a sandbox without an
//! allowlist cannot reach the proxy at all.

use std::path::Path;

use arbor_runtime::ExecOptions;

const HELPER: &str = env!("CARGO_BIN_EXE_arbor-test-helper");

fn run(sb: &mut arbor_runtime::Sandbox, cmd: &str) -> arbor_runtime::Observation {
    let opts = ExecOptions {
        timeout_ms: 240_000,
        ..ExecOptions::default()
    };
    sb.exec(cmd, &opts).unwrap()
}

const PROBE_PORT: &str = "import socket\ntry:\n    socket.create_connection(('127.0.0.1', 3128), 3).close(); print('open')\nexcept OSError as e:\n    print('closed', e.errno)\n";

#[test]
fn pip_installs_through_the_allowlist_and_nothing_else_gets_out() {
    let t = arbor_tests::runtime(Path::new(HELPER));
    let ws = t.scratch("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let snap = t.runtime.import(&ws, None).unwrap();

    // No allowlist: nothing listens on the proxy's port.
    let mut closed = snap.open().unwrap();
    closed
        .write_file("probe.py", PROBE_PORT.as_bytes(), 0o644)
        .unwrap();
    let o = run(&mut closed, "python3 probe.py");
    assert_eq!(
        o.stdout_text(),
        "closed 111\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.egress.is_empty());
    drop(closed);

    // pip's own index hosts, asked of pip inside a sandbox.
    let mut sb = snap.open().unwrap();
    let o = run(
        &mut sb,
        "python3 -c 'from pip._internal.models.index import PyPI; print(PyPI.netloc); print(PyPI.file_storage_domain)'",
    );
    assert_eq!(o.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let hosts: Vec<String> = o.stdout_text().lines().map(str::to_owned).collect();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    sb.allow_egress(&hosts).unwrap();
    sb.write_file("probe.py", PROBE_PORT.as_bytes(), 0o644)
        .unwrap();
    // Positive control for the probe: the port is open now.
    assert_eq!(run(&mut sb, "python3 probe.py").stdout_text(), "open\n");

    let o = run(
        &mut sb,
        "python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --break-system-packages \
         --target /workspace/lib six==1.16.0 && PYTHONPATH=/workspace/lib python3 -c 'import six; print(six.__version__)'",
    );
    assert_eq!(
        o.code(),
        Some(0),
        "pip install failed: {}\n{:?}",
        String::from_utf8_lossy(&o.stderr),
        o.egress
    );
    assert!(o.stdout_text().ends_with("1.16.0\n"), "{}", o.stdout_text());
    for h in &hosts {
        assert!(
            o.egress
                .iter()
                .any(|e| &e.host == h && e.allowed && e.method == "CONNECT" && e.bytes_in > 0),
            "no logged connection to {h}: {:?}",
            o.egress
        );
    }
    assert!(o.egress.iter().all(|e| e.allowed), "{:?}", o.egress);

    // Any other name is refused by the proxy, and logged.
    let o = run(
        &mut sb,
        "python3 -c \"import urllib.request\ntry:\n    urllib.request.urlopen('https://example.com', timeout=20); print('reached')\nexcept Exception as e:\n    print('refused', e)\"",
    );
    assert!(
        o.stdout_text().starts_with("refused"),
        "{}",
        o.stdout_text()
    );
    assert!(o.stdout_text().contains("403"), "{}", o.stdout_text());
    let ev = o
        .egress
        .iter()
        .find(|e| e.host == "example.com")
        .expect("logged");
    assert!(
        !ev.allowed
            && ev
                .reason
                .as_deref()
                .unwrap_or("")
                .contains("not on this sandbox's allowlist")
    );
    // Plain HTTP to another name too.
    let o = run(
        &mut sb,
        "python3 -c \"import urllib.request\ntry:\n    urllib.request.urlopen('http://example.org/', timeout=20); print('reached')\nexcept Exception as e:\n    print('refused', e)\"",
    );
    assert!(o.stdout_text().contains("403"), "{}", o.stdout_text());
    // An IP literal (even one of the allowed hosts' addresses) is refused.
    let connect_ip = "import socket\ns = socket.create_connection(('127.0.0.1', 3128), 5)\ns.sendall(b'CONNECT 151.101.0.223:443 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\nb = b''\nwhile b'\\r\\n' not in b:\n    c = s.recv(200)\n    if not c: break\n    b += c\nprint(b.split(b'\\r\\n')[0].decode())\n";
    sb.write_file("ip.py", connect_ip.as_bytes(), 0o644)
        .unwrap();
    let o = run(&mut sb, "python3 ip.py");
    assert_eq!(
        o.stdout_text(),
        "HTTP/1.1 403 Forbidden\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.egress
            .iter()
            .any(|e| !e.allowed && e.reason.as_deref().unwrap_or("").contains("IP literal"))
    );
    // And there is still no route out: a direct connection fails.
    let o = run(
        &mut sb,
        "python3 -c \"import socket\ntry:\n    socket.create_connection(('151.101.0.223', 443), 5); print('out')\nexcept OSError as e:\n    print('no route', e.errno)\"",
    );
    assert!(
        o.stdout_text().starts_with("no route"),
        "{}",
        o.stdout_text()
    );

    // The allowlist is checked: IP literals and junk are refused up front.
    let mut other = snap.open().unwrap();
    let e = other
        .allow_egress(&["10.0.0.1".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("IP literal"), "{e}");
}
