// Placeholder until scripts/gen-proto.sh runs.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct OffsetRange {
    #[prost(string, tag = "1")]
    pub topic: ::prost::alloc::string::String,
    #[prost(int32, tag = "2")]
    pub partition: i32,
    #[prost(int64, tag = "3")]
    pub first: i64,
    #[prost(int64, tag = "4")]
    pub last: i64,
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct FlushDescriptor {
    #[prost(string, tag = "1")]
    pub flush_id: ::prost::alloc::string::String,
    #[prost(enumeration = "FlushTrigger", tag = "2")]
    pub trigger: i32,
    #[prost(message, repeated, tag = "3")]
    pub ranges: ::prost::alloc::vec::Vec<OffsetRange>,
    #[prost(uint64, tag = "4")]
    pub expected_rows: u64,
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct FlushAck {
    #[prost(string, tag = "1")]
    pub flush_id: ::prost::alloc::string::String,
    #[prost(uint64, tag = "2")]
    pub rows_written: u64,
    #[prost(enumeration = "AckOutcome", tag = "3")]
    pub outcome: i32,
    #[prost(string, tag = "4")]
    pub sink: ::prost::alloc::string::String,
    #[prost(string, tag = "5")]
    pub table: ::prost::alloc::string::String,
    #[prost(int64, tag = "6")]
    pub snapshot_id: i64,
    #[prost(message, repeated, tag = "7")]
    pub recorded: ::prost::alloc::vec::Vec<OffsetRange>,
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct WriteError {
    #[prost(enumeration = "ErrorKind", tag = "1")]
    pub kind: i32,
    #[prost(string, tag = "2")]
    pub error_type: ::prost::alloc::string::String,
    #[prost(string, tag = "3")]
    pub message: ::prost::alloc::string::String,
    #[prost(string, tag = "4")]
    pub flush_id: ::prost::alloc::string::String,
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct RecordedOffsetsRequest {
    #[prost(string, tag = "1")]
    pub topic: ::prost::alloc::string::String,
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct RecordedOffsets {
    #[prost(message, repeated, tag = "1")]
    pub ranges: ::prost::alloc::vec::Vec<OffsetRange>,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum FlushTrigger {
    Unspecified = 0,
    Size = 1,
    Time = 2,
    Shutdown = 3,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum AckOutcome {
    Unspecified = 0,
    Written = 1,
    AlreadyRecorded = 2,
}
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
#[repr(i32)]
pub enum ErrorKind {
    Unspecified = 0,
    Retryable = 1,
    Permanent = 2,
}
