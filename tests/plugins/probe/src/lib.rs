//! A hostile plugin for the sandbox tests. `mode` picks the misbehaviour; each one must
//! end in a contained `execution_error` (or a refused capability) and never hurt the host.

use agent_plugin_sdk::http::Request;
use agent_plugin_sdk::{
    Capability, Error, Invocation, Manifest, Output, Param, ParamType, Plugin, Result, json, kv, llm, log, meter,
    progress,
};

mod hoard;

struct Probe;

impl Plugin for Probe {
    fn manifest() -> Manifest {
        Manifest::new("probe", "0.1.0")
            .describe("Sandbox probe")
            .param(Param::string("mode").required())
            .param(Param::string("url"))
            .param(Param::number("n"))
            .param(Param::new("texts", ParamType::Array))
            .capability(Capability::Http)
            .capability(Capability::Kv)
            .capability(Capability::Progress)
            .capability(Capability::Llm)
    }

    fn execute(call: Invocation) -> Result<Output> {
        let mode: String = call.param("mode")?;
        match mode.as_str() {
            "echo" => Ok(Output::text(format!(
                "probe ok: {}",
                call.opt_param::<String>("url")?.unwrap_or_default()
            ))),
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "sleep" => {
                let ms = call.opt_param::<u64>("n")?.unwrap_or(1000);
                for step in 0..10u8 {
                    progress::report(step * 10, Some("sleeping"));
                    std::thread::sleep(std::time::Duration::from_millis(ms / 10));
                }
                Ok(Output::text(format!("slept {ms} ms")))
            }
            "memory" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recursion" => Ok(Output::text(format!("{}", recurse(std::hint::black_box(1))))),
            "huge_output" => {
                let n = call.opt_param::<usize>("n")?.unwrap_or(4 << 20);
                Ok(Output::text("x".repeat(n)))
            }
            "read_file" => match std::fs::read_to_string("/etc/passwd") {
                Ok(text) => Ok(Output::text(text)),
                Err(e) => Err(Error::failed(format!("read_file: {e}"))),
            },
            "env" => {
                let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
                Ok(Output::text(format!("env: {} variables {:?}", vars.len(), vars)))
            }
            "http" => {
                let url: String = call.param("url")?;
                let response = Request::get(&url).send()?;
                Ok(Output::text(format!("status {}: {}", response.status, response.text())))
            }
            // The same request through wasi:http, with a standard client (wstd).
            "wasi_http" => {
                let url: String = call.param("url")?;
                wstd::runtime::block_on(wasi_get(url))
            }
            // `n` requests at once through wasi:http; answers how many came back 200.
            "wasi_http_burst" => {
                let url: String = call.param("url")?;
                let n = call.opt_param::<u32>("n")?.unwrap_or(10);
                wstd::runtime::block_on(async move {
                    let tasks: Vec<_> = (0..n).map(|_| wstd::runtime::spawn(wasi_get(url.clone()))).collect();
                    let mut ok = 0;
                    for task in tasks {
                        if task.await?.response.starts_with("status 200") {
                            ok += 1;
                        }
                    }
                    Ok(Output::text(format!("{ok} of {n} answered")))
                })
            }
            "kv_write" => {
                kv::set_string("probe", &call.param::<String>("url")?)?;
                Ok(Output::text("stored"))
            }
            "kv_read" => Ok(Output::text(
                kv::get_string("probe")?.unwrap_or_else(|| "nothing".into()),
            )),
            "panic" => panic!("the probe panicked on purpose"),
            // Reports progress as fast as it can for `n` ms.
            "progress_flood" => {
                let ms = call.opt_param::<u64>("n")?.unwrap_or(1000);
                let started = std::time::Instant::now();
                let mut reports: u64 = 0;
                while started.elapsed().as_millis() < ms as u128 {
                    progress::report((reports % 100) as u8, Some("flooding"));
                    reports += 1;
                }
                Ok(Output::text(format!("{reports} reports")))
            }
            // Writes `url` to the host log as given.
            "log" => {
                log::info(&call.param::<String>("url")?);
                Ok(Output::text("logged"))
            }
            // Asks the host's LLM for a long answer of up to `n` tokens.
            "llm" => {
                let tokens = call.opt_param::<u32>("n")?;
                let messages = [(llm::Role::User, "Write a very long story about the sea.".to_string())];
                Ok(Output::text(llm::chat(&messages, tokens)?))
            }
            // The host holds memory for it: header fields, bodies, unread responses of `url`.
            "hoard_fields" => hoard::fields(),
            "hoard_bodies" => hoard::bodies(),
            "hoard_responses" => match hoard::responses(&call.param::<String>("url")?) {
                Ok(()) => Ok(Output::text("hoarded")),
                Err(code) => Err(Error::failed(format!("wasi:http: {code:?}"))),
            },
            // Asks the host's LLM `n` times for up to 50 tokens each.
            "llm_loop" => {
                let n = call.opt_param::<u32>("n")?.unwrap_or(3);
                let messages = [(llm::Role::User, "Say hello.".to_string())];
                for _ in 0..n {
                    llm::chat(&messages, Some(50))?;
                }
                Ok(Output::text(format!("{n} answers")))
            }
            // Embeds `texts`: the vectors' length, and each one's cosine with the first.
            "embed" => {
                let texts: Vec<String> = call.param("texts")?;
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                let vectors = llm::embed(&texts)?;
                let cosines: Vec<f32> = vectors.iter().map(|v| llm::cosine(&vectors[0], v)).collect();
                Ok(Output::text(
                    json!({ "dimensions": vectors[0].len(), "cosines": cosines }).to_string(),
                ))
            }
            // Reports `n` units of work, one at a time, then answers, fails, refuses the
            // input or runs out of time (a command sold by use is charged only the first and
            // the third).
            "meter" | "meter_then_fail" | "meter_then_refuse" | "meter_then_loop" => {
                let mut total = 0;
                for _ in 0..call.opt_param::<u64>("n")?.unwrap_or(0) {
                    total = meter::add(1);
                }
                match mode.as_str() {
                    "meter_then_fail" => Err(Error::failed(format!("failed after {total} units"))),
                    "meter_then_refuse" => Err(Error::invalid(format!("refused after {total} units"))),
                    "meter_then_loop" => loop {
                        std::hint::black_box(total);
                    },
                    _ => Ok(Output::text(format!("worked {total} units"))),
                }
            }
            other => Err(Error::invalid(format!("unknown mode {other}"))),
        }
    }
}

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let buffer = std::hint::black_box([depth; 64]);
    if buffer[0] == 0 {
        0
    } else {
        recurse(depth + 1).wrapping_add(buffer[63])
    }
}

agent_plugin_sdk::export_plugin!(Probe);

async fn wasi_get(url: String) -> Result<Output> {
    use wstd::http::{Body, Client, Request};
    let request = Request::get(url.as_str())
        .body(Body::empty())
        .map_err(|e| Error::invalid(e.to_string()))?;
    let mut response = Client::new()
        .send(request)
        .await
        .map_err(|e| Error::failed(format!("wasi:http: {e:?}")))?;
    let status = response.status().as_u16();
    let text = response
        .body_mut()
        .str_contents()
        .await
        .map_err(|e| Error::failed(format!("wasi:http body: {e:?}")))?
        .to_string();
    Ok(Output::text(format!("status {status}: {text}")))
}
