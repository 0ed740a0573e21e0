//! loopgate-api: the manager's HTTP API as types, defined once and shared by the manager (which
//! answers with them) and the CLI (which reads them). Serde both ways, OpenAPI schemas through
//! `utoipa`; no I/O. The JSON of every type is the wire format: field names and order are
//! part of the contract. Response types read leniently (see [`runs`]); request types refuse
//! unknown keys, as the manager always has; the certificate is read strictly
//! (see [`certificate`]).

pub mod certificate;
pub mod common_schemas;
pub mod console;
pub mod contract;
pub mod error;
pub mod lenient;
pub mod rounds;
pub mod runs;

pub use certificate::{Certificate, TrustedKey, CERTIFICATE_FORMAT};
pub use console::{
    BudgetLine, BudgetView, FileChange, IntegrityReport, IntegrityViolation, ModelInfo, ModelList,
    ParseTaskRequest, ParsedTask, RoleProfiles, RunCounts, ServedProfile, SnapshotDiff,
};
pub use contract::{ApproveRequest, ContractView};
pub use error::{ErrorBody, ErrorDetail};
pub use loopgate_protocol::transcript::{Transcript, TranscriptEntry};
pub use rounds::{RoundList, RoundView};
pub use runs::{is_id_prefix, rounds_text, short_ids, standing_text, RunAction, SHORT_ID_LEN};
pub use runs::{
    AnswerRequest, Checks, ContinueRequest, EvidenceList, EvidenceView, GateView, InstructRequest,
    ListQuery, LogPage, ResumeRequest, RunList, RunView, ScreenshotView, SubmitRequest,
    UploadedFile, WorkspaceUpload, LOG_HEADLINE_KEY,
};
