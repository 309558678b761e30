//! Encoded rows put in key order, a later row of a key replacing an earlier
//! one, in bounded memory.
//!
//! The database fills the `(site, loc)` index fastest when rows arrive in
//! key order, and an import must keep only the last record of each key.
//! Sorting here, while the reader is busy anyway, costs less than sorting
//! wide rows inside PostgreSQL (measured on 1M rows: about 1 s here against
//! 5 s there). Up to `run_bytes` of rows are sorted in memory; a larger
//! input is sorted in runs spilled to anonymous temporary files and merged.
//! A full run is sorted and written on a thread of its own while the next
//! one fills, so reading goes on meanwhile; at most two runs are in memory.
//!
//! A row is one line whose leading bytes order it: the key (fields that
//! hold no tab or control character) ending in a tab, then a fixed-width
//! sequence number, so that plain byte order is key order and, within a
//! key, arrival order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, Write};
use std::thread::JoinHandle;

/// Rows sorted in memory before a run is spilled to disk.
pub(crate) const RUN_BYTES: usize = 32 * 1024 * 1024;

/// Sorts rows of `key_fields` tab-ended key fields followed by a sequence
/// number, keeping the row with the highest sequence number of each key.
#[derive(Debug)]
pub(crate) struct KeySorter {
    key_fields: usize,
    run_bytes: usize,
    run: Run,
    runs: Vec<File>,
    /// The run being sorted and written, which gives its emptied buffers
    /// back for the run after next: filling fresh memory costs a page
    /// fault a page, and growing a buffer copies it.
    spilling: Option<JoinHandle<io::Result<(File, Run)>>>,
}

/// Rows not yet sorted, and what is learnt of each as it arrives, while
/// it is still in the cache: where its key ends, and how many leading
/// bytes all of them share.
#[derive(Debug, Default)]
struct Run {
    rows: Vec<u8>,
    spans: Vec<Span>,
    shared: usize,
}

/// One row of a run: where it lies, and how long its key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    len: u32,
    key_len: u32,
}

impl Span {
    fn row<'a>(&self, rows: &'a [u8]) -> &'a [u8] {
        &rows[self.start..self.start + self.len as usize]
    }
}

impl Run {
    fn push(&mut self, row: &[u8], key_fields: usize) -> io::Result<()> {
        let too_long = || io::Error::other("a row of 4 GiB or more");
        let span = Span {
            start: self.rows.len(),
            len: u32::try_from(row.len()).map_err(|_| too_long())?,
            key_len: u32::try_from(key(row, key_fields).len()).map_err(|_| too_long())?,
        };
        self.shared = match self.spans.first() {
            None => row.len(),
            Some(first) => common_prefix_len(&first.row(&self.rows)[..self.shared], row),
        };
        self.rows.extend_from_slice(row);
        self.spans.push(span);
        Ok(())
    }

    /// Puts the spans in the rows' byte order, the last of each key alone.
    fn keep_last_in_order(&mut self) {
        let kept = keep_last_in_order(&self.rows, &self.spans, self.shared);
        self.spans.clear();
        self.spans.extend(kept.into_iter().map(|(_, span)| span));
    }
}

impl KeySorter {
    pub(crate) fn new(key_fields: usize, run_bytes: usize) -> Self {
        Self {
            key_fields,
            run_bytes,
            run: Run::default(),
            runs: Vec::new(),
            spilling: None,
        }
    }

    /// Adds one row (ending in a newline).
    pub(crate) fn push(&mut self, row: &[u8]) -> io::Result<()> {
        self.run.push(row, self.key_fields)?;
        if self.run.rows.len() >= self.run_bytes {
            self.spill()?;
        }
        Ok(())
    }

    /// Hands every kept row to `emit`, in order; stops early when `emit`
    /// returns false. Returns whether every row was handed over.
    pub(crate) fn finish(mut self, mut emit: impl FnMut(&[u8]) -> bool) -> io::Result<bool> {
        if self.runs.is_empty() && self.spilling.is_none() {
            self.run.keep_last_in_order();
            let rows = &self.run.rows;
            return Ok(self.run.spans.iter().all(|span| emit(span.row(rows))));
        }
        // The rows still in memory join the merge from there: spilling
        // them would put a write and a read of up to a run's bytes between
        // the last record read and the first row out. They are sorted while
        // the last full run is still being written.
        self.run.keep_last_in_order();
        self.collect_spill()?;
        let mut runs = Vec::with_capacity(self.runs.len() + 1);
        for mut file in std::mem::take(&mut self.runs) {
            file.rewind()?;
            runs.push(SortedRun::Spilled(BufReader::with_capacity(
                64 * 1024,
                file,
            )));
        }
        runs.push(SortedRun::InMemory {
            rows: &self.run.rows,
            spans: self.run.spans.iter(),
        });
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (index, run) in runs.iter_mut().enumerate() {
            if let Some(row) = run.next_row()? {
                heap.push(Reverse((row, index)));
            }
        }
        let mut pending: Option<Vec<u8>> = None;
        while let Some(Reverse((row, index))) = heap.pop() {
            if let Some(next) = runs[index].next_row()? {
                heap.push(Reverse((next, index)));
            }
            if let Some(earlier) = pending.take()
                && key(&earlier, self.key_fields) != key(&row, self.key_fields)
                && !emit(&earlier)
            {
                return Ok(false);
            }
            pending = Some(row);
        }
        Ok(pending.is_none_or(|last| emit(&last)))
    }

    /// Hands the rows in memory to a thread that sorts and writes them,
    /// once the previous run is written.
    fn spill(&mut self) -> io::Result<()> {
        let next = self.collect_spill()?.unwrap_or_else(|| Run {
            rows: Vec::with_capacity(self.run_bytes.saturating_add(RUN_SLACK)),
            spans: Vec::with_capacity(self.run.spans.len()),
            shared: 0,
        });
        let mut run = std::mem::replace(&mut self.run, next);
        self.spilling = Some(std::thread::spawn(move || {
            let mut out = BufWriter::new(tempfile::tempfile()?);
            run.keep_last_in_order();
            for span in &run.spans {
                out.write_all(span.row(&run.rows))?;
            }
            let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
            run.rows.clear();
            run.spans.clear();
            Ok((file, run))
        }));
        Ok(())
    }

    /// Waits for the run being written, if any; returns its buffers.
    fn collect_spill(&mut self) -> io::Result<Option<Run>> {
        let Some(spilling) = self.spilling.take() else {
            return Ok(None);
        };
        let (file, emptied) = spilling
            .join()
            .map_err(|_| io::Error::other("the sorting thread panicked"))??;
        self.runs.push(file);
        Ok(Some(emptied))
    }
}

/// Room past a run's bytes for the row that fills it.
const RUN_SLACK: usize = 64 * 1024;

/// Sorts rows already in memory (newline-ended, as for [`KeySorter`]): a
/// batch of the write API's, small enough to compare whole.
pub(crate) fn sort_in_memory(rows: &[u8], key_fields: usize) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = rows.split_inclusive(|&b| b == b'\n').collect();
    lines.sort_unstable();
    let mut out = Vec::with_capacity(rows.len());
    for (at, line) in lines.iter().enumerate() {
        let last_of_its_key = lines
            .get(at + 1)
            .is_none_or(|next| key(next, key_fields) != key(line, key_fields));
        if last_of_its_key {
            out.extend_from_slice(line);
        }
    }
    out
}

/// Sorts the rows' spans by the rows' bytes and drops all but the last
/// of each key. Every row starts with the same `shared` bytes.
///
/// The rows of an import share a long prefix (the site and its base URL),
/// which every comparison of whole rows would read again, and a run is far
/// larger than the cache: rows are ordered by the 16 bytes after that
/// prefix first, and read only when those tie; a key is told from the next
/// by its length and those bytes, and read only when they cannot tell.
fn keep_last_in_order(rows: &[u8], spans: &[Span], shared: usize) -> Vec<(u128, Span)> {
    let mut keyed: Vec<(u128, Span)> = spans
        .iter()
        .map(|span| (window(span.row(rows), shared), *span))
        .collect();
    let past_window = shared + WINDOW;
    keyed.sort_unstable_by(|(window_a, a), (window_b, b)| {
        window_a.cmp(window_b).then_with(|| {
            // Equal windows: the bytes before the window's end, or before
            // either row's end, are equal.
            let (a, b) = (a.row(rows), b.row(rows));
            let from = past_window.min(a.len()).min(b.len());
            a[from..].cmp(&b[from..])
        })
    });
    // Each key's last row replaces the ones before it, in place.
    let mut kept = 0;
    for at in 0..keyed.len() {
        if kept > 0 && same_key(rows, keyed[kept - 1], keyed[at], shared) {
            keyed[kept - 1] = keyed[at];
        } else {
            keyed[kept] = keyed[at];
            kept += 1;
        }
    }
    keyed.truncate(kept);
    keyed
}

/// Bytes of a row, after the shared prefix, that order it before it is read.
const WINDOW: usize = 16;

/// Whether two rows (with their windows) have the same key.
fn same_key(
    rows: &[u8],
    (window_a, a): (u128, Span),
    (window_b, b): (u128, Span),
    shared: usize,
) -> bool {
    if a.key_len != b.key_len {
        return false;
    }
    let key_len = a.key_len as usize;
    if window_a != window_b && shared + WINDOW <= key_len {
        // The windows lie within the keys.
        return false;
    }
    let from = shared.min(key_len);
    a.row(rows)[from..key_len] == b.row(rows)[from..key_len]
}

/// How many leading bytes `a` and `b` share.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(a, b)| a == b).count()
}

/// The 16 bytes of `row` from `from` on, as a number that orders as they
/// do, zeros past its end: two rows whose windows differ are in the order
/// of their bytes (a row that ends first is the smaller, and its zeros are
/// never above the other's bytes); equal windows leave it to the bytes.
fn window(row: &[u8], from: usize) -> u128 {
    let tail = row.get(from..).unwrap_or_default();
    let mut bytes = [0; WINDOW];
    let len = tail.len().min(bytes.len());
    bytes[..len].copy_from_slice(&tail[..len]);
    u128::from_be_bytes(bytes)
}

/// A sorted run being merged.
enum SortedRun<'a> {
    Spilled(BufReader<File>),
    InMemory {
        rows: &'a [u8],
        spans: std::slice::Iter<'a, Span>,
    },
}

impl SortedRun<'_> {
    fn next_row(&mut self) -> io::Result<Option<Vec<u8>>> {
        match self {
            SortedRun::Spilled(reader) => {
                let mut row = Vec::new();
                Ok((reader.read_until(b'\n', &mut row)? > 0).then_some(row))
            }
            SortedRun::InMemory { rows, spans } => {
                Ok(spans.next().map(|span| span.row(rows).to_vec()))
            }
        }
    }
}

/// The row's leading `fields` tab-ended fields.
fn key(row: &[u8], fields: usize) -> &[u8] {
    let end = row
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\t')
        .nth(fields - 1)
        .map_or(row.len(), |(at, _)| at + 1);
    &row[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(rows: &[&str], run_bytes: usize) -> Vec<String> {
        let mut sorter = KeySorter::new(2, run_bytes);
        for row in rows {
            sorter.push(row.as_bytes()).expect("push");
        }
        let mut out = Vec::new();
        let complete = sorter
            .finish(|row| {
                out.push(String::from_utf8(row.to_vec()).expect("utf-8"));
                true
            })
            .expect("finish");
        assert!(complete);
        out
    }

    #[test]
    fn rows_come_out_in_key_order_with_the_last_of_each_key() {
        let rows = [
            "s\thttps://e.com/b\t01\tfirst\n",
            "s\thttps://e.com/a\t02\tonly\n",
            "s\thttps://e.com/b\t03\tsecond\n",
            "r\thttps://e.com/z\t04\tother site\n",
            "s\thttps://e.com/b\t05\tthird\n",
            "s\thttps://e.com/ab\t06\tlonger key\n",
        ];
        let expected = [
            "r\thttps://e.com/z\t04\tother site\n",
            "s\thttps://e.com/a\t02\tonly\n",
            "s\thttps://e.com/ab\t06\tlonger key\n",
            "s\thttps://e.com/b\t05\tthird\n",
        ];
        // all in memory, one row per run, and runs of a few rows
        for run_bytes in [usize::MAX, 1, 60] {
            assert_eq!(
                sorted(&rows, run_bytes),
                expected,
                "runs of {run_bytes} bytes"
            );
        }
    }

    #[test]
    fn a_stopped_consumer_stops_the_merge() {
        let mut sorter = KeySorter::new(2, 1);
        for row in ["a\tx\t1\n", "b\tx\t2\n", "c\tx\t3\n"] {
            sorter.push(row.as_bytes()).expect("push");
        }
        let mut seen = 0;
        let complete = sorter
            .finish(|_| {
                seen += 1;
                seen < 2
            })
            .expect("finish");
        assert!(!complete);
        assert_eq!(seen, 2);
    }

    #[test]
    fn rows_in_memory_sort_the_same_way() {
        let rows = "b\tx\t1\tfirst\na\tx\t2\tonly\nb\tx\t3\tsecond\n";
        assert_eq!(
            sort_in_memory(rows.as_bytes(), 2),
            b"a\tx\t2\tonly\nb\tx\t3\tsecond\n"
        );
    }

    proptest::proptest! {
        /// Whatever the rows share and wherever they end, the order is
        /// their bytes' order, each row once.
        #[test]
        fn rows_sort_as_their_bytes_do(
            prefix in proptest::collection::vec(proptest::sample::select(vec![0u8, b'\t', b'a', b'b']), 0..20),
            tails in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec![0u8, b'\t', b'a', b'b', 0xff]), 0..24),
                0..40,
            ),
        ) {
            let rows: Vec<Vec<u8>> = tails.iter().map(|tail| [&prefix[..], tail].concat()).collect();
            // More key fields than any row has tabs: a row is its own key.
            let mut expected: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
            expected.sort();
            expected.dedup();
            let run = sorted_run_of(&rows, 100);
            let sorted: Vec<&[u8]> = run.spans.iter().map(|span| span.row(&run.rows)).collect();
            proptest::prop_assert_eq!(sorted, expected);
        }

        /// Of rows whose leading fields tie, the greatest alone is kept,
        /// however much of the key the shared prefix and the window cover.
        #[test]
        fn rows_of_one_key_keep_the_greatest(
            prefix in proptest::collection::vec(proptest::sample::select(vec![b'\t', b'a', b'b']), 0..20),
            tails in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec![0u8, b'\t', b'a', b'b']), 0..24),
                0..40,
            ),
            key_fields in 1usize..4,
        ) {
            let rows: Vec<Vec<u8>> = tails.iter().map(|tail| [&prefix[..], tail].concat()).collect();
            let run = sorted_run_of(&rows, key_fields);
            let sorted: Vec<&[u8]> = run.spans.iter().map(|span| span.row(&run.rows)).collect();
            proptest::prop_assert_eq!(sorted, greatest_of_each_key(&rows, key_fields));

            // The write API's batches, newline-ended, sort the same way.
            let lines: Vec<Vec<u8>> = rows.iter().map(|row| [&row[..], b"\n"].concat()).collect();
            proptest::prop_assert_eq!(
                sort_in_memory(&lines.concat(), key_fields),
                greatest_of_each_key(&lines, key_fields).concat()
            );
        }
    }

    /// The rows in byte order, of those whose keys tie only the greatest.
    fn greatest_of_each_key(rows: &[Vec<u8>], key_fields: usize) -> Vec<&[u8]> {
        let mut rows: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        rows.sort();
        rows.dedup();
        rows.iter()
            .enumerate()
            .filter(|(at, row)| {
                rows.get(at + 1)
                    .is_none_or(|next| key(next, key_fields) != key(row, key_fields))
            })
            .map(|(_, row)| *row)
            .collect()
    }

    fn sorted_run_of(rows: &[Vec<u8>], key_fields: usize) -> Run {
        let mut run = Run::default();
        for row in rows {
            run.push(row, key_fields).expect("a short row");
        }
        run.keep_last_in_order();
        run
    }

    #[test]
    fn nothing_in_nothing_out() {
        assert!(sorted(&[], 1).is_empty());
    }
}
