//! Who may steer a running job: the control API answers only requests that
//! carry the bearer token of the job's run file (mode 0600, in a run
//! directory of mode 0700); a missing or wrong token is refused with 401,
//! the CLI exits non-zero and names the token, and the job runs on
//! untouched. A request whose Host names another machine (DNS rebinding)
//! is refused with 421. A run directory others can write is refused, and
//! so is a run file another user could have planted.

use super::support::{JobDir, PATIENCE, final_counts, text, wait_until};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;
use weir_host::connectors::generator::key_of;
use weir_tests::{artifacts, host_command};

const RECORDS: u64 = 40_000;
const KEYS: u64 = 50;

fn write_job(dir: &JobDir) {
    dir.write(
        "job.toml",
        format!(
            r#"name = "guarded"

[[sources]]
id = "gen"
kind = "generator"
count = {RECORDS}
keys = {KEYS}
records_per_second = 4000

[[operators]]
uid = "counter"
module = "{counter}"
input = "gen"
partition = "key"

[[sinks]]
id = "out"
kind = "file"
input = "counter"
path = "out.txt"
"#,
            counter = artifacts::WORD_COUNT_COUNTER
        ),
    );
}

/// The run file of job `job` started in `dir`, once it is there: (port,
/// token).
pub(super) fn endpoint(dir: &JobDir, job: &str) -> (u16, String) {
    let file = dir.path().join(".run").join(format!("{job}.json"));
    let run = dir.wait_until("the run file", || {
        let text = std::fs::read_to_string(&file).ok()?;
        serde_json::from_str::<serde_json::Value>(&text).ok()
    });
    (run["port"].as_u64().unwrap() as u16, run["token"].as_str().unwrap().to_string())
}

/// `GET path` with the token, as JSON, once `ok` holds for it.
pub(super) fn wait_for(
    port: u16,
    token: &str,
    path: &str,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    wait_until(&format!("GET {path} to answer 200 with what the test waits for"), PATIENCE, || {
        let (code, body) = request(port, "GET", path, Some(token));
        serde_json::from_str(&body).ok().filter(|v| code == 200 && ok(v))
    })
}

/// One HTTP request to the control port: (status code, body).
pub(super) fn request(port: u16, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    request_with(port, method, path, token, "")
}

/// One HTTP request with a JSON `body`: (status code, body).
pub(super) fn request_with(port: u16, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let code = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{answer:?}"));
    (code, answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// `request` (its head, and body if any) sent as is to the control port;
/// the whole answer.
fn raw_request(port: u16, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// `host status guarded --json` answered with the job running.
fn running(dir: &JobDir) -> bool {
    let out = dir.host(&["status", "guarded", "--json"]);
    out.status.success() && serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["state"] == "running"
}

#[test]
fn only_the_run_files_token_steers_the_job() {
    let dir = JobDir::new();
    write_job(&dir);
    let child = dir.start(&[]);
    dir.wait_until("the job to answer", || running(&dir));

    // The run file and its directory are the user's alone.
    let run_dir = dir.path().join(".run");
    let run_file = run_dir.join("guarded.json");
    let me = std::fs::metadata(dir.path()).unwrap().uid();
    let file_meta = std::fs::symlink_metadata(&run_file).unwrap();
    assert!(file_meta.is_file());
    assert_eq!(file_meta.permissions().mode() & 0o777, 0o600, "run file mode");
    assert_eq!(file_meta.uid(), me);
    let dir_meta = std::fs::symlink_metadata(&run_dir).unwrap();
    assert_eq!(dir_meta.permissions().mode() & 0o777, 0o700, "run directory mode");
    let run_text = std::fs::read_to_string(&run_file).unwrap();
    let run: serde_json::Value = serde_json::from_str(&run_text).unwrap();
    let port = run["port"].as_u64().unwrap() as u16;
    let token = run["token"].as_str().unwrap().to_string();
    assert!(token.len() >= 32, "a token of at least 128 bits: {token:?}");
    // Same length, last character changed.
    let mut wrong = token.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == '0' { '1' } else { '0' });

    // Raw requests: without the token, with a wrong one, with the right one.
    for (path, method) in [("/v1/job", "GET"), ("/v1/cancel", "POST"), ("/v1/savepoints", "POST")] {
        for given in [None, Some(wrong.as_str()), Some(&token[..token.len() - 1])] {
            let (code, body) = request(port, method, path, given);
            assert_eq!(code, 401, "{method} {path} with token {given:?}: {body}");
            assert!(body.contains("missing or wrong bearer token"), "{body}");
        }
    }
    let (code, body) = request(port, "GET", "/v1/job", Some(&token));
    assert_eq!(code, 200, "{body}");
    // DNS rebinding: a page whose name resolves to 127.0.0.1 sends its own
    // name as Host, and is refused, the token (or rest.auth = "none")
    // notwithstanding; the machine's addresses and localhost pass.
    for (host, want) in [("rebind.example", 421), ("localhost.rebind.example", 421), ("localhost", 200), ("[::1]", 200)]
    {
        for path in ["/v1/job", "/"] {
            let answer = raw_request(
                port,
                &format!(
                    "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
                ),
            );
            let code: u16 = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
            assert_eq!(code, want, "GET {path} with Host {host}: {answer}");
            if want == 421 {
                assert!(answer.contains("DNS rebinding"), "{answer}");
            }
        }
    }
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["job"], "guarded");
    assert_eq!(status["state"], "running", "the refused cancels changed nothing");

    // The CLI with a wrong token in the run file: refused, non-zero exit,
    // the reason named; the job runs on.
    std::fs::write(&run_file, run_text.replace(&token, &wrong)).unwrap();
    for args in
        [&["status", "guarded"][..], &["cancel", "guarded"], &["savepoint", "guarded", "--dir", "file:///nowhere"]]
    {
        let out = dir.host(args);
        assert!(!out.status.success(), "{args:?} with a wrong token succeeded");
        let err = text(&out.stderr);
        assert!(err.contains("job 'guarded'") && err.contains("missing or wrong bearer token"), "{args:?}: {err}");
    }
    std::fs::write(&run_file, &run_text).unwrap();
    assert!(running(&dir), "the job still runs, and the right token works again");

    // The job was not disturbed: it ends well, with exact output, and
    // removes its run file.
    let (ok, err) = dir.finish(child);
    assert!(ok, "{err}");
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..RECORDS {
        *expected.entry(key_of(0, i, KEYS).to_string()).or_insert(0u64) += 1;
    }
    assert_eq!(final_counts(&dir.read("out.txt")), expected);
    assert!(!run_file.exists(), "the run file is removed at the end");
}

#[test]
fn a_run_directory_others_can_write_is_refused() {
    let dir = JobDir::new();
    write_job(&dir);
    let open = dir.path().join("open-run-dir");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = host_command(dir.path(), &["run", "job.toml"]).env("WEIR_RUN_DIR", &open).output().unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("the run directory {} is writable by others", open.display()))
            && err.contains("token would not be private"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "no run file was written there");
    assert!(!dir.path().join("out.txt").exists() || dir.read("out.txt").is_empty(), "the job did not run");
}

#[test]
fn a_run_file_another_user_could_have_planted_is_not_trusted() {
    use std::os::unix::fs::{chown, symlink};
    let dir = JobDir::new();
    // A server standing in for another user's, which the planted run files
    // point at: no command may reach it.
    let theirs = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = theirs.local_addr().unwrap().port();
    // A live pid (this test's), as the planter would give.
    let run = serde_json::json!({
        "job": "guarded", "pid": std::process::id(), "host": "127.0.0.1", "port": port, "token": "planted"
    })
    .to_string();
    let nobody = 65534;
    let plant = |name: &str, dir_mode: u32, dir_owner: u32, file_owner: u32| {
        let run_dir = dir.path().join(name);
        std::fs::create_dir(&run_dir).unwrap();
        let file = run_dir.join("guarded.json");
        std::fs::write(&file, &run).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        chown(&file, Some(file_owner), Some(file_owner)).unwrap();
        std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(dir_mode)).unwrap();
        chown(&run_dir, Some(dir_owner), Some(dir_owner)).unwrap();
        (run_dir, file)
    };
    let me = std::fs::metadata(dir.path()).unwrap().uid();
    let mut cases = vec![
        // As in a shared /tmp: another user's directory anyone may write.
        (plant("theirs-open", 0o777, nobody, nobody), format!("it belongs to user {nobody}")),
        // Another user's run file in the user's own directory.
        (plant("mine-their-file", 0o700, me, nobody), format!("it belongs to user {nobody}")),
    ];
    // The user's own run file, in a directory anyone may write (and so
    // replace it in).
    let (open_dir, open_file) = plant("mine-open", 0o777, me, me);
    cases.push(((open_dir.clone(), open_file), format!("its directory {} is writable by others", open_dir.display())));
    // A link in the user's own directory to a run file elsewhere.
    let (_, elsewhere) = plant("elsewhere", 0o700, me, me);
    let linked_dir = dir.path().join("linked");
    std::fs::create_dir(&linked_dir).unwrap();
    std::fs::set_permissions(&linked_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    symlink(&elsewhere, linked_dir.join("guarded.json")).unwrap();
    cases.push(((linked_dir.clone(), linked_dir.join("guarded.json")), "it is a symbolic link".into()));

    theirs.set_nonblocking(true).unwrap();
    for ((run_dir, file), why) in &cases {
        for args in [&["status", "guarded"][..], &["cancel", "guarded"], &["savepoint", "guarded"]] {
            let out = host_command(dir.path(), args).env("WEIR_RUN_DIR", run_dir).output().unwrap();
            let err = text(&out.stderr);
            assert!(!out.status.success(), "{args:?} with {} succeeded", file.display());
            assert!(
                err.contains(&format!("refusing the run file {}: {why}", file.display())),
                "{args:?} with {}:\n{err}",
                file.display()
            );
        }
    }
    let reached = theirs.accept();
    assert!(
        reached.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "a command reached the planted server: {reached:?}"
    );

    // The same run file in a directory of the user's own is believed: the
    // command goes to the server it names (which is why a planted one must
    // not be).
    theirs.set_nonblocking(false).unwrap();
    let heard = std::thread::spawn(move || {
        let (mut s, _) = theirs.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut request = vec![0u8; 4096];
        let n = s.read(&mut request).unwrap_or(0);
        String::from_utf8_lossy(&request[..n]).into_owned()
    });
    let (own_dir, _) = plant("own", 0o700, me, me);
    let out = host_command(dir.path(), &["status", "guarded"]).env("WEIR_RUN_DIR", &own_dir).output().unwrap();
    let request = heard.join().unwrap();
    assert!(request.starts_with("GET /v1/job") && request.contains("Bearer planted"), "{request:?}");
    assert!(!out.status.success(), "the stand-in answers nothing");
}
