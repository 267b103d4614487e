//! MCP over streamable HTTP at `/mcp` (`serve --mcp-write` offers the writing tools): the SDK's
//! own service (`rmcp::transport::StreamableHttpService`) answers each request, after the
//! board's token is checked; its body, JSON or a stream of events, is written out as it comes.

use std::io::Write as _;
use std::net::TcpStream;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::http::Request;
use crate::cli::mcp::Loop;

/// The MCP endpoint: the SDK's service and the runtime its sessions live on.
pub(super) struct Endpoint {
    runtime: tokio::runtime::Runtime,
    service: StreamableHttpService<Loop, LocalSessionManager>,
}

impl Endpoint {
    pub(super) fn new(server: Loop, host: &str) -> std::io::Result<Endpoint> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
        hosts.push(host.to_owned());
        let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts);
        let service =
            StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
        Ok(Endpoint { runtime, service })
    }

    /// Answer one request, its response's body written as it comes (a stream of events until it
    /// ends or the peer goes).
    pub(super) fn answer(&self, stream: &mut TcpStream, request: &Request) -> std::io::Result<()> {
        let mut built = http::Request::builder().method(request.method.as_str()).uri(request.path.as_str());
        for (name, value) in request.headers() {
            built = built.header(name.as_str(), value.as_str());
        }
        let Ok(built) = built.body(Full::new(Bytes::from(request.body.clone()))) else {
            return super::http::json(stream, 400, &serde_json::json!({ "error": "the request could not be read" }));
        };
        let service = self.service.clone();
        let response = self.runtime.block_on(async move { service.handle(built).await });
        let (parts, mut body) = response.into_parts();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
            parts.status.as_u16(),
            parts.status.canonical_reason().unwrap_or("")
        );
        for (name, value) in &parts.headers {
            if let Ok(value) = value.to_str() {
                if !matches!(name.as_str(), "connection" | "content-length" | "transfer-encoding") {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
            }
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.flush()?;
        // Closed by the end of the body (the connection is not kept).
        while let Some(frame) = self.runtime.block_on(body.frame()) {
            let Ok(frame) = frame;
            if let Ok(data) = frame.into_data() {
                stream.write_all(&data)?;
                stream.flush()?;
            }
        }
        Ok(())
    }
}
