//! A write API request body: its media type and encoding checked, read up
//! to the size limit, gzip decoded (every member of a multi-member file)
//! with the limit counted after decompression (so a small bomb cannot
//! expand past it).

use std::io::Read;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use flate2::read::MultiGzDecoder;
use futures_util::TryStreamExt;

use crate::http::error::{HttpError, Problem};
use crate::ingest::batch::BatchFormat;

/// The media types a batch may come as, for error messages.
const ACCEPTED: &str = "application/json (an array) or application/x-ndjson (one record a line)";

/// The body's bytes, decoded, and how its records are laid out.
pub(super) async fn read(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<(Vec<u8>, BatchFormat), HttpError> {
    let format = batch_format(headers)?;
    let gzip = is_gzip(headers)?;
    let mut raw = Vec::new();
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.try_next().await.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "unreadable-body",
            format!("reading the body: {e}"),
        )
    })? {
        if raw.len() + chunk.len() > limit {
            return Err(too_large(limit));
        }
        raw.extend_from_slice(&chunk);
    }
    if !gzip {
        return Ok((raw, format));
    }
    // Every member of a multi-member file, as `gzip -d` decodes it; bytes
    // after the last member that are not a gzip member refuse the body.
    let mut decoded = Vec::with_capacity(raw.len() * 4);
    MultiGzDecoder::new(raw.as_slice())
        .take(limit as u64 + 1)
        .read_to_end(&mut decoded)
        .map_err(|e| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "bad-gzip",
                format!("Content-Encoding: gzip, but the body does not decode: {e}"),
            )
        })?;
    if decoded.len() > limit {
        return Err(too_large(limit));
    }
    Ok((decoded, format))
}

fn too_large(limit: usize) -> HttpError {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body-too-large",
        format!(
            "the body is over {limit} bytes (counted after decompression); send smaller batches"
        ),
    )
    .into()
}

fn unsupported(detail: String) -> HttpError {
    Problem::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported-media-type",
        detail,
    )
    .into()
}

fn batch_format(headers: &HeaderMap) -> Result<BatchFormat, HttpError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "application/json" => Ok(BatchFormat::JsonArray),
        "application/x-ndjson" | "application/jsonl" | "application/x-jsonlines" => {
            Ok(BatchFormat::Ndjson)
        }
        "" => Err(unsupported(format!("no Content-Type: send {ACCEPTED}"))),
        other => Err(unsupported(format!(
            "Content-Type {other:?} is not accepted: send {ACCEPTED}"
        ))),
    }
}

fn is_gzip(headers: &HeaderMap) -> Result<bool, HttpError> {
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    match encoding.as_str() {
        "identity" | "" => Ok(false),
        "gzip" | "x-gzip" => Ok(true),
        other => Err(unsupported(format!(
            "Content-Encoding {other:?} is not accepted: send the body as is or gzip"
        ))),
    }
}
