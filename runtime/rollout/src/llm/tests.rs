use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::context::{self, ContextBudget, Parsed};
use super::*;
use crate::env::{AgentAction, EnvObservation};
use arbor_runtime::store::object::ExitStatus;

fn obs(step: usize, output: &str) -> EnvObservation {
    EnvObservation {
        task: "t".into(),
        instructions: "fix the bug".into(),
        step,
        last_action: None,
        output: output.into(),
        exit: Some(ExitStatus::Code { code: 0 }),
    }
}

#[test]
fn specs_parse_with_options_and_bad_ones_are_named() {
    let c = OpenAiConfig::parse("http://127.0.0.1:8000?temperature=0.5&max_tokens=64#m").unwrap();
    assert_eq!(c.base, "http://127.0.0.1:8000/v1");
    assert_eq!(c.model.as_deref(), Some("m"));
    assert_eq!((c.temperature, c.max_tokens), (0.5, 64));
    let c = OpenAiConfig::parse("http://h:1/api/v1/").unwrap();
    assert_eq!((c.base.as_str(), c.model), ("http://h:1/api/v1", None));
    for (bad, says) in [
        ("", "needs a URL"),
        ("http://h:1?temp=1", "unknown option \"temp\""),
        ("http://h:1?top_p=0", "top_p=0"),
        ("http://h:1?max_tokens=x", "whole number"),
        ("http://h:1?extensions=sglang", "vllm or none"),
        ("http://h:1?timeout_s=0", "positive"),
    ] {
        let e = OpenAiConfig::parse(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
    let e = JsonClient::new("https://api.example.com/v1", HttpSettings::default()).unwrap_err();
    assert!(e.contains("https is not supported"), "{e}");
}

#[test]
fn tool_calls_map_to_actions_and_back() {
    let cases = [
        (
            "bash",
            json!({"command": "ls -la"}),
            AgentAction::exec("ls -la"),
        ),
        (
            "bash",
            json!({"command": "make", "timeout_s": 2.5}),
            AgentAction::Exec {
                command: "make".into(),
                timeout_ms: Some(2500),
            },
        ),
        (
            "write_file",
            json!({"path": "a.py", "content": "x = 1\n"}),
            AgentAction::write("a.py", "x = 1\n"),
        ),
        (
            "read_file",
            json!({"path": "it's.txt"}),
            AgentAction::exec(r"cat -- 'it'\''s.txt'"),
        ),
        ("submit", json!({}), AgentAction::Submit),
    ];
    for (name, args, want) in cases {
        let got = context::action_of_call(name, &args).unwrap();
        assert_eq!(got, want, "{name}");
        let (back, back_args) = context::call_of_action(&got).unwrap();
        assert_eq!((back, &back_args), (name, &args), "round trip of {name}");
    }
    for (name, args, says) in [
        ("rm", json!({}), "unknown tool `rm`"),
        ("bash", json!({}), "needs `command`"),
        ("bash", json!({"command": 3}), "not a string"),
        (
            "bash",
            json!({"command": "x", "cwd": "/"}),
            "no argument `cwd`",
        ),
        (
            "bash",
            json!({"command": "x", "timeout_s": -1}),
            "not in (0, 86400]",
        ),
        ("write_file", json!({"path": "a"}), "needs `content`"),
        ("submit", json!([1]), "not an object"),
    ] {
        let e = context::action_of_call(name, &args).unwrap_err();
        assert!(e.contains(says), "{name} {args}: {e}");
    }
}

#[test]
fn replies_parse_from_tool_calls_or_content_and_garbage_is_invalid() {
    let call = |name: &str, args: &str| json!({"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function", "function": {"name": name, "arguments": args}}]});
    assert_eq!(
        context::parse_reply(&call("bash", r#"{"command": "pytest"}"#)),
        Parsed::Action(AgentAction::exec("pytest"))
    );
    assert_eq!(
        context::parse_reply(&call("submit", "")),
        Parsed::Action(AgentAction::Submit)
    );
    let content = |c: &str| json!({"role": "assistant", "content": c});
    assert_eq!(
        context::parse_reply(&content(
            r#"thinking <tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>"#
        )),
        Parsed::Action(AgentAction::exec("ls"))
    );
    assert_eq!(
        context::parse_reply(&content(r#"{"name": "submit", "arguments": {}}"#)),
        Parsed::Action(AgentAction::Submit)
    );
    for (reply, says) in [
        (call("bash", "{not json"), "not JSON"),
        (call("fly", "{}"), "unknown tool"),
        (content("I think the bug is in line 3"), "no tool call"),
        (content(""), "no tool call"),
        (
            json!({"tool_calls": [{"function": {}}]}),
            "without a function name",
        ),
    ] {
        match context::parse_reply(&reply) {
            Parsed::Invalid(why) => assert!(why.contains(says), "{reply}: {why}"),
            Parsed::Action(a) => panic!("{reply} parsed as {a}"),
        }
    }
    // The invalid action prints the reason and is shown as what it was.
    let a = context::invalid_action("it's wrong");
    assert!(context::call_of_action(&a).is_none());
    assert!(a.text().contains("invalid reply: it"), "{}", a.text());
}

#[test]
fn the_context_shows_every_action_and_output_and_cuts_with_a_mark() {
    let history: Vec<AgentAction> = (0..6)
        .map(|i| AgentAction::exec(format!("echo {i}")))
        .collect();
    let outputs: Vec<EnvObservation> = (0..6).map(|i| obs(i + 1, &"x".repeat(300 + i))).collect();
    let unlimited = ContextBudget {
        tokens: 0,
        bytes_per_token: 3,
    };
    let (m, cut) = context::build_messages("sys", &obs(6, ""), &history, &outputs, &unlimited);
    assert!(!cut);
    assert_eq!(
        m.len(),
        2 + 2 * 6,
        "system, task, then a call and its output per step"
    );
    assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "bash");
    assert_eq!(m[3]["role"], "tool");
    assert!(m[3]["content"].as_str().unwrap().starts_with("xxx"));
    assert!(
        m[3]["content"].as_str().unwrap().ends_with("[exit 0]"),
        "{}",
        m[3]["content"]
    );
    let tight = ContextBudget {
        tokens: 400,
        bytes_per_token: 3,
    };
    let (m, cut) = context::build_messages("sys", &obs(6, ""), &history, &outputs, &tight);
    assert!(cut);
    let mark = m[2]["content"].as_str().unwrap();
    assert!(mark.contains("earlier steps left out"), "{mark}");
    // The latest step is kept, whole.
    let last = m.last().unwrap()["content"].as_str().unwrap();
    assert!(last.starts_with(&"x".repeat(305)), "{last}");
    assert!(m.len() < 2 + 2 * 6);
}

#[test]
fn tokens_are_captured_only_when_the_server_gives_ids() {
    let with_ids = json!({"logprobs": {"content": [
        {"token": "token_id:5", "logprob": -0.5}, {"token": "token_id:7", "logprob": -1.0}
    ]}});
    let (t, lp) = capture_tokens(&with_ids);
    assert_eq!(t.unwrap().ids, vec![5, 7]);
    assert!((lp.unwrap() + 1.5).abs() < 1e-12);
    let listed = json!({"token_ids": [1, 2], "logprobs": {"content": [
        {"token": "a", "logprob": -0.1}, {"token": "b", "logprob": -0.2}
    ]}});
    assert_eq!(capture_tokens(&listed).0.unwrap().ids, vec![1, 2]);
    // Text tokens only: log-probs, but no ids (never invented).
    let text_only = json!({"logprobs": {"content": [{"token": "a", "logprob": -0.1}]}});
    let (t, lp) = capture_tokens(&text_only);
    assert!(t.is_none());
    assert!(lp.is_some());
    // Ids that do not line up with the log-probs are not used.
    let skewed = json!({"token_ids": [1], "logprobs": {"content": [
        {"token": "a", "logprob": -0.1}, {"token": "b", "logprob": -0.2}
    ]}});
    assert!(capture_tokens(&skewed).0.is_none());
    assert_eq!(capture_tokens(&json!({"logprobs": null})), (None, None));
}

/// A loopback HTTP server that answers each request with the next of
/// `answers` (status, body), counting requests; the last answer repeats.
async fn server(
    answers: Vec<(u16, String)>,
) -> (String, Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (c, b) = (Arc::clone(&count), Arc::clone(&bodies));
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (c, b, answers) = (Arc::clone(&c), Arc::clone(&b), answers.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut tmp = [0u8; 8192];
                loop {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    let Some(head_end) = text.find("\r\n\r\n") else {
                        continue;
                    };
                    let len: usize = text[..head_end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() < head_end + 4 + len {
                        continue;
                    }
                    let body = &buf[head_end + 4..head_end + 4 + len];
                    b.lock()
                        .unwrap()
                        .push(serde_json::from_slice(body).unwrap_or(Value::Null));
                    buf.drain(..head_end + 4 + len);
                    let i = c.fetch_add(1, Ordering::SeqCst).min(answers.len() - 1);
                    let (status, body) = &answers[i];
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if sock.write_all(resp.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{addr}/v1"), count, bodies)
}

fn completion(choices: usize) -> String {
    let c: Vec<Value> = (0..choices)
        .map(|i| {
            json!({"index": i, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "bash", "arguments": format!("{{\"command\": \"echo {i}\"}}")}}]},
                "logprobs": {"content": [{"token": "token_id:11", "logprob": -0.25}, {"token": format!("token_id:{}", 20 + i), "logprob": -0.5}]},
            })
        })
        .collect();
    json!({"model": "tiny", "prompt_token_ids": [1, 2, 3], "choices": c}).to_string()
}

fn decision() -> Decision {
    Decision {
        task: "t".into(),
        observation: obs(0, ""),
        candidates: vec![AgentAction::Submit],
        history: vec![],
        observations: vec![],
        reference: None,
    }
}

#[tokio::test]
async fn a_branch_point_is_one_request_with_n_and_5xx_is_retried() {
    let models = json!({"data": [{"id": "tiny", "root": "/models/tiny"}]}).to_string();
    let (url, count, bodies) = server(vec![
        (200, models),
        (503, "{}".into()),
        (429, "{}".into()),
        (200, completion(3)),
    ])
    .await;
    let p = OpenAiPolicy::connect(&format!("{url}?retries=3&timeout_s=5"))
        .await
        .unwrap();
    assert_eq!(p.model(), "tiny", "the server's first model");
    let got = p.choose_n(decision(), 3, 42).await.unwrap();
    assert_eq!(
        count.load(Ordering::SeqCst),
        4,
        "models, 503, 429, then the answer"
    );
    let sent = bodies.lock().unwrap().clone();
    assert_eq!(sent[3]["n"], 3, "one request for the three siblings");
    assert_eq!(sent[3]["logprobs"], true);
    assert_eq!(sent[3]["tools"].as_array().unwrap().len(), 4);
    assert_eq!(got.len(), 3);
    for (i, c) in got.iter().enumerate() {
        assert_eq!(c.action, AgentAction::exec(format!("echo {i}")));
        let t = c.tokens.as_ref().unwrap();
        assert_eq!(t.ids, vec![11, 20 + i as u32]);
        assert!((c.log_prob + 0.75).abs() < 1e-12);
        let g = c.generation.as_ref().unwrap();
        assert_eq!(g.prompt_ids.as_deref(), Some(&[1, 2, 3][..]));
        assert_eq!(g.model.as_deref(), Some("tiny"));
        assert_eq!(g.sampling.as_ref().unwrap()["n"], 3);
        assert!(g.invalid.is_none());
    }
    let info = p.describe().unwrap();
    assert_eq!(info["revision"], "/models/tiny");
}

#[tokio::test]
async fn a_server_that_ignores_n_is_asked_again_and_a_400_is_not_retried() {
    let (url, count, _) = server(vec![(200, completion(1))]).await;
    let p = OpenAiPolicy::connect(&format!("{url}#tiny")).await.unwrap();
    let got = p.choose_n(decision(), 3, 1).await.unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(
        count.load(Ordering::SeqCst),
        1 + 3,
        "models, then one request per missing choice"
    );

    let (url, count, _) = server(vec![
        (200, "{\"data\": []}".into()),
        (400, "{\"error\": \"bad field\"}".into()),
    ])
    .await;
    let p = OpenAiPolicy::connect(&format!("{url}#tiny")).await.unwrap();
    let e = p.choose_n(decision(), 1, 1).await.unwrap_err().to_string();
    assert!(e.contains("HTTP 400") && e.contains("bad field"), "{e}");
    assert_eq!(count.load(Ordering::SeqCst), 2, "a 400 is not retried");

    // Unreachable: a named error after the retries, no hang.
    let e = OpenAiPolicy::connect("http://127.0.0.1:9?retries=1&timeout_s=2")
        .await
        .unwrap_err();
    assert!(
        e.contains("the model server") && e.contains("after 2 tries"),
        "{e}"
    );
}

#[tokio::test]
async fn a_malformed_tool_call_is_an_invalid_action_not_an_error() {
    let bad = json!({"model": "tiny", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "I will now fix it"}}]})
    .to_string();
    let (url, _, _) = server(vec![(200, bad)]).await;
    let p = OpenAiPolicy::connect(&format!("{url}#tiny")).await.unwrap();
    let got = p.choose_n(decision(), 1, 1).await.unwrap();
    let g = got[0].generation.as_ref().unwrap();
    assert!(
        g.invalid.as_deref().unwrap().contains("no tool call"),
        "{g:?}"
    );
    assert!(
        got[0].tokens.is_none(),
        "no logprobs: tokens are null, not invented"
    );
    assert!(got[0].action.text().contains("invalid reply"));
    assert_eq!(g.text.as_deref(), Some("I will now fix it"));
}
