//! PostgreSQL's binary `COPY` format, for the few column types a fold moves
//! in bulk: `bigint`, `integer`, `boolean`, `text`, `timestamptz`, and
//! one-dimensional arrays of `bigint`, `integer` and `text`.
//!
//! A fold streams a million rows out and tens of thousands of runs and its
//! feed entries back in;
//! the binary format costs neither side any parsing of numbers or escaping
//! of text. The layout (sql-copy.html, "Binary Format"): a signature, flags
//! and a header extension; then per tuple a 16-bit field count and, per
//! field, a 32-bit length (-1 for NULL) and the value in the type's send
//! format; then a count of -1.

use std::cell::Cell;

use bytes::{Buf, BufMut, BytesMut};
use sqlx::PgConnection;
use sqlx::postgres::PgCopyIn;

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// The signature, the flags and the header extension's length.
const HEADER_BYTES: usize = SIGNATURE.len() + 4 + 4;

const INT8_OID: i32 = 20;
const INT4_OID: i32 = 23;
const TEXT_OID: i32 = 25;

/// Where `timestamptz`'s microseconds count from.
const POSTGRES_EPOCH: time::OffsetDateTime = time::macros::datetime!(2000-01-01 0:00 UTC);

/// The `COPY` stream was not what the statement's columns promise.
#[derive(Debug, thiserror::Error)]
#[error("binary COPY data: {0}")]
pub struct FormatError(String);

pub(super) fn malformed(what: impl Into<String>) -> FormatError {
    FormatError(what.into())
}

/// Reads tuples out of a `COPY ... TO STDOUT (FORMAT binary)` stream that
/// arrives in chunks of any size.
#[derive(Default)]
pub(super) struct Reader {
    buffer: BytesMut,
    header_read: bool,
    ended: bool,
}

impl Reader {
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole tuple, or `None` until more bytes are pushed (or
    /// after the end marker).
    pub(super) fn next_tuple(&mut self) -> Result<Option<Tuple>, FormatError> {
        if !self.header_read {
            if self.buffer.len() < HEADER_BYTES {
                return Ok(None);
            }
            if &self.buffer[..SIGNATURE.len()] != SIGNATURE {
                return Err(malformed("no PGCOPY signature"));
            }
            let extension = u32::from_be_bytes(self.buffer[15..19].try_into().expect("4 bytes"));
            let skip = HEADER_BYTES + extension as usize;
            if self.buffer.len() < skip {
                return Ok(None);
            }
            self.buffer.advance(skip);
            self.header_read = true;
        }
        if self.ended || self.buffer.len() < 2 {
            return Ok(None);
        }
        let fields = i16::from_be_bytes([self.buffer[0], self.buffer[1]]);
        if fields == -1 {
            self.ended = true;
            self.buffer.advance(2);
            return Ok(None);
        }
        let Ok(fields) = usize::try_from(fields) else {
            return Err(malformed(format!("a tuple of {fields} fields")));
        };
        // Whole before it is read: the end of each field, from the lengths.
        let mut end = 2;
        for _ in 0..fields {
            let Some(length) = self.buffer.get(end..end + 4) else {
                return Ok(None);
            };
            let length = i32::from_be_bytes(length.try_into().expect("4 bytes"));
            end += 4 + usize::try_from(length).unwrap_or(0);
            if end > self.buffer.len() {
                return Ok(None);
            }
        }
        let tuple = self.buffer.split_to(end).freeze();
        Ok(Some(Tuple {
            bytes: tuple,
            at: Cell::new(2),
            remaining: Cell::new(fields),
        }))
    }

    /// Checks that the stream ended where it should: at its end marker.
    pub(super) fn finish(self) -> Result<(), FormatError> {
        match (self.ended, self.buffer.is_empty()) {
            (true, true) => Ok(()),
            (true, false) => Err(malformed("bytes after the end marker")),
            (false, _) => Err(malformed("the stream ended before its end marker")),
        }
    }
}

/// One tuple's fields, read in column order. Reading takes `&self`, so
/// the text of one field can be held while the next is read.
pub(super) struct Tuple {
    bytes: bytes::Bytes,
    at: Cell<usize>,
    remaining: Cell<usize>,
}

impl Tuple {
    fn field(&self) -> Result<Option<&[u8]>, FormatError> {
        let Some(remaining) = self.remaining.get().checked_sub(1) else {
            return Err(malformed(
                "a tuple with fewer fields than its statement's columns",
            ));
        };
        self.remaining.set(remaining);
        let at = self.at.get();
        let length = i32::from_be_bytes(self.bytes[at..at + 4].try_into().expect("4 bytes"));
        let Ok(length) = usize::try_from(length) else {
            self.at.set(at + 4);
            return Ok(None);
        };
        self.at.set(at + 4 + length);
        Ok(Some(&self.bytes[at + 4..at + 4 + length]))
    }

    fn value<const N: usize>(&self, column: &str) -> Result<[u8; N], FormatError> {
        let value = self
            .field()?
            .ok_or_else(|| malformed(format!("{column} is NULL")))?;
        value
            .try_into()
            .map_err(|_| malformed(format!("{column} has {} bytes, not {N}", value.len())))
    }

    pub(super) fn int8(&self, column: &str) -> Result<i64, FormatError> {
        self.value(column).map(i64::from_be_bytes)
    }

    pub(super) fn int4(&self, column: &str) -> Result<i32, FormatError> {
        self.value(column).map(i32::from_be_bytes)
    }

    /// An `integer` that may be NULL.
    pub(super) fn optional_int4(&self, column: &str) -> Result<Option<i32>, FormatError> {
        self.field()?
            .map(|value| {
                <[u8; 4]>::try_from(value)
                    .map(i32::from_be_bytes)
                    .map_err(|_| malformed(format!("{column} has {} bytes, not 4", value.len())))
            })
            .transpose()
    }

    pub(super) fn bool(&self, column: &str) -> Result<bool, FormatError> {
        self.value::<1>(column).map(|[byte]| byte != 0)
    }

    pub(super) fn str(&self, column: &str) -> Result<&str, FormatError> {
        self.optional_str(column)?
            .ok_or_else(|| malformed(format!("{column} is NULL")))
    }

    pub(super) fn optional_str(&self, column: &str) -> Result<Option<&str>, FormatError> {
        self.field()?
            .map(|value| {
                std::str::from_utf8(value).map_err(|_| malformed(format!("{column} is not UTF-8")))
            })
            .transpose()
    }
}

/// A `COPY table (columns) FROM STDIN (FORMAT binary)`. Every tuple
/// written for it has as many fields as the statement lists columns,
/// counted from the statement itself, so the two cannot drift apart.
#[derive(Debug, Clone, Copy)]
pub(super) struct CopyIn {
    statement: &'static str,
    columns: i16,
}

impl CopyIn {
    /// `statement` names its columns in its first parentheses.
    pub(super) const fn new(statement: &'static str) -> CopyIn {
        let bytes = statement.as_bytes();
        let mut columns = 0;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'(' if columns == 0 => columns = 1,
                b',' if columns > 0 => columns += 1,
                b')' if columns > 0 => break,
                _ => {}
            }
            i += 1;
        }
        assert!(columns > 0, "a COPY statement names its columns");
        CopyIn { statement, columns }
    }

    /// Begins the `COPY` on `conn`.
    pub(super) async fn open(self, conn: &mut PgConnection) -> Result<CopyStream<'_>, sqlx::Error> {
        Ok(CopyStream {
            copy: conn.copy_in_raw(self.statement).await?,
            rows: Writer::new(self),
        })
    }
}

/// A `COPY … FROM STDIN` under way: its tuples are written with
/// [`CopyStream::rows`], and sent a chunk at a time as they are.
pub(super) struct CopyStream<'c> {
    copy: PgCopyIn<&'c mut PgConnection>,
    rows: Writer,
}

impl CopyStream<'_> {
    /// Where the next tuple is written.
    pub(super) fn rows(&mut self) -> &mut Writer {
        &mut self.rows
    }

    /// Sends what is written once it fills a chunk; called between tuples.
    pub(super) async fn flush(&mut self) -> Result<(), sqlx::Error> {
        if let Some(chunk) = self.rows.full_chunk() {
            self.copy.send(chunk).await?;
        }
        Ok(())
    }

    /// Sends the rest, and ends the `COPY`.
    pub(super) async fn finish(mut self) -> Result<(), sqlx::Error> {
        self.copy.send(self.rows.finish()).await?;
        self.copy.finish().await?;
        Ok(())
    }
}

/// How much of a stream [`Writer::full_chunk`] hands over at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// Writes tuples for a [`CopyIn`]; each tuple is a field count followed by
/// exactly that many fields.
pub(super) struct Writer {
    copy: CopyIn,
    buffer: BytesMut,
    /// Fields the tuple being written still lacks.
    fields_left: i16,
}

impl Writer {
    fn new(copy: CopyIn) -> Writer {
        let mut buffer = BytesMut::with_capacity(64 * 1024);
        buffer.put_slice(SIGNATURE);
        buffer.put_u32(0);
        buffer.put_u32(0);
        Writer {
            copy,
            buffer,
            fields_left: 0,
        }
    }

    /// Begins a tuple: its fields follow, one call each.
    pub(super) fn tuple(&mut self) -> &mut Self {
        debug_assert_eq!(self.fields_left, 0, "the last tuple lacks fields");
        self.fields_left = self.copy.columns;
        self.buffer.put_i16(self.copy.columns);
        self
    }

    fn field(&mut self) {
        debug_assert!(self.fields_left > 0, "more fields than the COPY's columns");
        self.fields_left -= 1;
    }

    pub(super) fn int8(&mut self, value: i64) -> &mut Self {
        self.field();
        self.buffer.put_i32(8);
        self.buffer.put_i64(value);
        self
    }

    pub(super) fn int4(&mut self, value: i32) -> &mut Self {
        self.field();
        self.buffer.put_i32(4);
        self.buffer.put_i32(value);
        self
    }

    pub(super) fn optional_int4(&mut self, value: Option<i32>) -> &mut Self {
        match value {
            Some(value) => self.int4(value),
            None => self.null(),
        }
    }

    pub(super) fn text(&mut self, value: &str) -> &mut Self {
        self.field();
        self.buffer.put_i32(length(value.len()));
        self.buffer.put_slice(value.as_bytes());
        self
    }

    pub(super) fn optional_text(&mut self, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.text(value),
            None => self.null(),
        }
    }

    /// A `timestamptz`, to the microsecond.
    pub(super) fn timestamptz(&mut self, at: time::OffsetDateTime) -> &mut Self {
        let micros = (at - POSTGRES_EPOCH).whole_microseconds();
        self.int8(i64::try_from(micros).expect("a time within PostgreSQL's range"))
    }

    fn null(&mut self) -> &mut Self {
        self.field();
        self.buffer.put_i32(-1);
        self
    }

    /// An array of `values`, which are gone over twice: counted, then
    /// written.
    pub(super) fn int8_array(&mut self, values: impl Iterator<Item = i64> + Clone) -> &mut Self {
        let count = values.clone().count();
        self.array_header(INT8_OID, count, count * 8);
        for value in values {
            self.buffer.put_i32(8);
            self.buffer.put_i64(value);
        }
        self
    }

    pub(super) fn int4_array(&mut self, values: impl Iterator<Item = i32> + Clone) -> &mut Self {
        let count = values.clone().count();
        self.array_header(INT4_OID, count, count * 4);
        for value in values {
            self.buffer.put_i32(4);
            self.buffer.put_i32(value);
        }
        self
    }

    pub(super) fn text_array<'a>(
        &mut self,
        values: impl Iterator<Item = &'a str> + Clone,
    ) -> &mut Self {
        let (count, bytes) = values.clone().fold((0, 0), |(count, bytes), value| {
            (count + 1, bytes + value.len())
        });
        self.array_header(TEXT_OID, count, bytes);
        for value in values {
            self.buffer.put_i32(length(value.len()));
            self.buffer.put_slice(value.as_bytes());
        }
        self
    }

    /// A one-dimensional array from 1 of `count` non-NULL elements of
    /// `bytes` bytes in all.
    fn array_header(&mut self, element_oid: i32, count: usize, bytes: usize) {
        self.field();
        self.buffer.put_i32(length(20 + count * 4 + bytes));
        self.buffer.put_i32(1);
        self.buffer.put_i32(0);
        self.buffer.put_i32(element_oid);
        self.buffer.put_i32(length(count));
        self.buffer.put_i32(1);
    }

    /// What is written so far, once it reaches `CHUNK_BYTES`, taken to be
    /// sent while the rest is written: the stream is never held whole.
    /// Taken between tuples only.
    fn full_chunk(&mut self) -> Option<BytesMut> {
        debug_assert_eq!(self.fields_left, 0, "the last tuple lacks fields");
        (self.buffer.len() >= CHUNK_BYTES).then(|| self.buffer.split())
    }

    /// The stream, ended with its end marker.
    fn finish(mut self) -> BytesMut {
        debug_assert_eq!(self.fields_left, 0, "the last tuple lacks fields");
        self.buffer.put_i16(-1);
        self.buffer
    }
}

/// A length as the format writes it; a field of 2 GiB or more cannot be
/// sent in one, and nothing a fold writes comes near.
fn length(bytes: usize) -> i32 {
    i32::try_from(bytes).expect("a COPY field under 2 GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuples_of(stream: &[u8], chunk: usize) -> Vec<(i64, i32, i32, Option<String>)> {
        let mut reader = Reader::default();
        let mut read = Vec::new();
        for part in stream.chunks(chunk) {
            reader.push(part);
            while let Some(tuple) = reader.next_tuple().expect("well formed") {
                read.push((
                    tuple.int8("a").expect("a"),
                    tuple.int4("b").expect("b"),
                    tuple.int4("c").expect("c"),
                    tuple.optional_str("d").expect("d").map(str::to_owned),
                ));
            }
        }
        reader.finish().expect("whole");
        read
    }

    #[test]
    fn a_stream_in_any_chunks_reads_as_whole_tuples() {
        let mut stream = SIGNATURE.to_vec();
        stream.extend_from_slice(&0u32.to_be_bytes());
        stream.extend_from_slice(&0u32.to_be_bytes());
        let mut tuple = |a: i64, b: i32, c: i32, d: Option<&str>| {
            stream.extend_from_slice(&4i16.to_be_bytes());
            stream.extend_from_slice(&8i32.to_be_bytes());
            stream.extend_from_slice(&a.to_be_bytes());
            stream.extend_from_slice(&4i32.to_be_bytes());
            stream.extend_from_slice(&b.to_be_bytes());
            stream.extend_from_slice(&4i32.to_be_bytes());
            stream.extend_from_slice(&c.to_be_bytes());
            match d {
                Some(d) => {
                    stream.extend_from_slice(&(d.len() as i32).to_be_bytes());
                    stream.extend_from_slice(d.as_bytes());
                }
                None => stream.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        };
        tuple(-7, i32::MAX, -1, Some("día"));
        tuple(i64::MAX, 0, 0, None);
        stream.extend_from_slice(&(-1i16).to_be_bytes());
        let expected = vec![
            (-7, i32::MAX, -1, Some("día".to_owned())),
            (i64::MAX, 0, 0, None),
        ];
        for chunk in [1, 3, 7, stream.len()] {
            assert_eq!(tuples_of(&stream, chunk), expected, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_missing_signature_or_field_is_an_error() {
        let mut reader = Reader::default();
        reader.push(b"PGCOPX\n\xff\r\n\0\0\0\0\0\0\0\0\0");
        assert!(reader.next_tuple().is_err());

        let mut writer = Writer::new(CopyIn::new("COPY t (a) FROM STDIN (FORMAT binary)"));
        writer.tuple().int8(1);
        let mut reader = Reader::default();
        reader.push(&writer.finish());
        let tuple = reader.next_tuple().expect("well formed").expect("a tuple");
        assert_eq!(tuple.int8("a").expect("a"), 1);
        assert!(tuple.int8("b").is_err());
    }

    #[test]
    fn a_stream_taken_in_chunks_is_the_stream_written_whole() {
        let copy = CopyIn::new("COPY t (a, b, c, d) FROM STDIN (FORMAT binary)");
        let write = |writer: &mut Writer, n: i64| {
            writer
                .tuple()
                .int8(n)
                .int4(-1)
                .int4(7)
                .optional_text(Some("a loc of some length"));
        };
        let mut whole = Writer::new(copy);
        let mut chunked = Writer::new(copy);
        let mut sent = BytesMut::new();
        for n in 0..100_000 {
            write(&mut whole, n);
            write(&mut chunked, n);
            if let Some(chunk) = chunked.full_chunk() {
                assert!(chunk.len() >= CHUNK_BYTES);
                sent.extend_from_slice(&chunk);
            }
        }
        assert!(sent.len() >= CHUNK_BYTES, "some of it went in chunks");
        sent.extend_from_slice(&chunked.finish());
        assert_eq!(sent, whole.finish());
        assert_eq!(tuples_of(&sent, 4096).len(), 100_000);
    }

    #[test]
    fn arrays_are_written_one_dimensional_from_one() {
        let mut writer = Writer::new(CopyIn::new("COPY t (a) FROM STDIN (FORMAT binary)"));
        writer.tuple().int4_array([5, -1].into_iter());
        let written = writer.finish();
        let array = &written[HEADER_BYTES + 2..written.len() - 2];
        let words: Vec<i32> = array
            .chunks(4)
            .map(|w| i32::from_be_bytes(w.try_into().expect("4 bytes")))
            .collect();
        // length, ndim, has nulls, element type, size, lower bound, then
        // each element's length and value
        assert_eq!(words, [36, 1, 0, INT4_OID, 2, 1, 4, 5, 4, -1]);
    }

    #[test]
    fn text_arrays_hold_each_element_with_its_length() {
        let mut writer = Writer::new(CopyIn::new("COPY t (a) FROM STDIN (FORMAT binary)"));
        writer.tuple().text_array(["ab", "", "c"].into_iter());
        let written = writer.finish();
        let array = &written[HEADER_BYTES + 2..written.len() - 2];
        let mut expected = Vec::new();
        for word in [35, 1, 0, TEXT_OID, 3, 1, 2] {
            expected.extend_from_slice(&i32::to_be_bytes(word));
        }
        expected.extend_from_slice(b"ab");
        expected.extend_from_slice(&0i32.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(b"c");
        assert_eq!(array, expected);
    }

    #[test]
    fn times_are_microseconds_since_2000() {
        let mut writer = Writer::new(CopyIn::new("COPY t (a, b) FROM STDIN (FORMAT binary)"));
        writer
            .tuple()
            .timestamptz(time::macros::datetime!(2000-01-01 0:00:01.000002 UTC))
            .timestamptz(time::macros::datetime!(1999-12-31 23:59:59 UTC));
        let written = writer.finish();
        let fields = &written[HEADER_BYTES + 2..written.len() - 2];
        let mut expected = Vec::new();
        for micros in [1_000_002i64, -1_000_000] {
            expected.extend_from_slice(&8i32.to_be_bytes());
            expected.extend_from_slice(&micros.to_be_bytes());
        }
        assert_eq!(fields, expected);
    }

    #[test]
    fn a_copy_has_as_many_fields_as_its_statement_lists_columns() {
        let copy = CopyIn::new("COPY t (a, b,\n c) FROM STDIN (FORMAT binary)");
        assert_eq!(copy.columns, 3);
        let mut writer = Writer::new(copy);
        writer.tuple().int8(1).text("x").optional_int4(None);
        let written = writer.finish();
        assert_eq!(
            &written[HEADER_BYTES..HEADER_BYTES + 2],
            &3i16.to_be_bytes()
        );
    }
}
