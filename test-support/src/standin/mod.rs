//! `StandInModel`: an in-process HTTP server speaking the OpenAI chat-completions wire format
//! (`POST /v1/chat/completions`, `GET /v1/models`) and, on the same port, the Anthropic Messages
//! format (`POST /v1/messages`, rendered by `anthropic`), with scripted replies, for
//! tests of the model adapters and of the whole system. A request with `"stream": true` gets
//! the reply as server-sent events in the provider's format (tool-call arguments in pieces,
//! usage in the last chunk); [`Fault`]s render as the provider's real error responses.
//!
//! Replies are keyed by the request's `model` field (e.g. `standin-manager`,
//! `standin-executor`, `standin-auditor`): each model has a FIFO queue of [`Reply`]s and an
//! optional fallback repeated once the queue is empty; with neither, the server answers HTTP
//! 500 with an OpenAI-style error body. Every request is recorded for inspection. Usage numbers
//! are chars/4 (rounded up) of the request body and of the reply. Image parts (OpenAI
//! `image_url` data URLs, Anthropic `image` blocks) are checked as the providers check them and
//! recorded decoded (`StandInModel::images`). The server stops on drop.

mod anthropic;
mod images;
mod openai;
mod script;
mod server;
mod wire;

pub use anthropic::last_tool_result;
pub use images::RecordedImage;
pub use script::{Fault, Reply, Script};
pub use server::{last_message_content, StandInModel};
