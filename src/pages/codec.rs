//! How bodies are compressed: gzip for `.xml.gz` files, and gzip, brotli or
//! zstd on the wire for `.xml` documents, as the client accepts. A [`Sink`]
//! takes XML as it is written and hands back the bytes ready to send.

use std::io::Write;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;

/// XML gathered before it is compressed and sent as one chunk.
pub(crate) const CHUNK_BYTES: usize = 64 * 1024;

/// How a body is compressed: gzip for `.xml.gz` files, and any of these on
/// the wire for `.xml` documents, as the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Codec {
    Identity,
    Gzip,
    Brotli,
    Zstd,
}

/// Brotli quality for wire compression: fast, yet smaller than gzip -6.
const BROTLI_QUALITY: u32 = 5;
const BROTLI_WINDOW_BITS: u32 = 22;
/// zstd's own default level.
const ZSTD_LEVEL: i32 = 3;

impl Codec {
    /// The `Content-Encoding` token (also used in ETags).
    pub(crate) fn token(self) -> &'static str {
        match self {
            Codec::Identity => "identity",
            Codec::Gzip => "gzip",
            Codec::Brotli => "br",
            Codec::Zstd => "zstd",
        }
    }
}

/// Compresses a whole document held in memory (the index).
pub(crate) fn compress(
    codec: Codec,
    gzip_level: u32,
    document: Vec<u8>,
) -> std::io::Result<Vec<u8>> {
    let mut document = document;
    let mut sink = Sink::new(codec, gzip_level)?;
    let head = sink.write(&mut document)?;
    let tail = sink.finish(&mut document)?;
    Ok([head, tail].concat())
}

/// Where written XML goes: through a compressor, or straight out.
pub(crate) enum Sink {
    Identity,
    Gzip(Box<GzEncoder<Vec<u8>>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(Box<zstd::stream::write::Encoder<'static, Vec<u8>>>),
}

impl Sink {
    pub(crate) fn new(codec: Codec, gzip_level: u32) -> std::io::Result<Sink> {
        Ok(match codec {
            Codec::Identity => Sink::Identity,
            Codec::Gzip => Sink::Gzip(Box::new(GzEncoder::new(
                Vec::new(),
                Compression::new(gzip_level),
            ))),
            Codec::Brotli => Sink::Brotli(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                CHUNK_BYTES,
                BROTLI_QUALITY,
                BROTLI_WINDOW_BITS,
            ))),
            Codec::Zstd => Sink::Zstd(Box::new(zstd::stream::write::Encoder::new(
                Vec::new(),
                ZSTD_LEVEL,
            )?)),
        })
    }

    /// Takes the XML gathered in `xml` (leaving it empty) and returns the
    /// bytes ready to send, which for a compressor may be none yet.
    pub(crate) fn write(&mut self, xml: &mut Vec<u8>) -> std::io::Result<Bytes> {
        let out = match self {
            Sink::Identity => {
                let capacity = xml.capacity();
                return Ok(Bytes::from(std::mem::replace(
                    xml,
                    Vec::with_capacity(capacity),
                )));
            }
            Sink::Gzip(encoder) => {
                encoder.write_all(xml)?;
                encoder.get_mut()
            }
            Sink::Brotli(encoder) => {
                encoder.write_all(xml)?;
                encoder.get_mut()
            }
            Sink::Zstd(encoder) => {
                encoder.write_all(xml)?;
                encoder.get_mut()
            }
        };
        xml.clear();
        Ok(Bytes::from(std::mem::take(out)))
    }

    /// Takes the last XML and ends the stream (the compressor's trailer).
    pub(crate) fn finish(self, xml: &mut Vec<u8>) -> std::io::Result<Bytes> {
        let out = match self {
            Sink::Identity => std::mem::take(xml),
            Sink::Gzip(mut encoder) => {
                encoder.write_all(xml)?;
                encoder.finish()?
            }
            Sink::Brotli(mut encoder) => {
                encoder.write_all(xml)?;
                encoder.flush()?;
                encoder.into_inner()
            }
            Sink::Zstd(mut encoder) => {
                encoder.write_all(xml)?;
                encoder.finish()?
            }
        };
        Ok(Bytes::from(out))
    }
}
