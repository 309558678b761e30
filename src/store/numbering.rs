//! Numbering the rows a fold places: the page each one goes on, and which
//! of them stand together in a run.
//!
//! The schema's fold did this with a sort and a running total over every
//! row, then a grouping: three passes of the executor over a million rows,
//! 2.5 s of a 1M-row fold (migration `numbering_in_the_service`). Here it
//! is one sort and one pass over a section's rows in memory, by the same
//! rule, so pages fill exactly as they did.
//!
//! The rule: a section's new rows, in id order, fill its last page and then
//! new pages, each row taking its own bytes. A row starts on the page where
//! the running total of max(bytes * max_urls, room) falls, in units of
//! max_urls * room per page, where room is the page budget less the
//! largest entry being placed. So no page holds more than max_urls rows
//! (each takes at least room / max_urls of a unit) or more than its budget
//! (a page ends at most one entry past room). Plain rows (no images,
//! videos or alternates) a run's share of a page apart, room * 64 units,
//! form one run: at most 64 rows, all on one page.

/// What a page may hold, as `sitemap_settings` says.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(crate) max_urls: i64,
    /// Bytes of entries a page may hold (max_bytes less the document's own).
    pub(crate) entry_budget: i64,
}

/// A section's last page before the fold, as its summary counts it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tail {
    pub(crate) page: i32,
    pub(crate) url_count: i64,
    pub(crate) bytes: i64,
}

/// A row of a section to place.
#[derive(Debug, Clone)]
pub(super) struct Unplaced {
    pub(crate) id: i64,
    pub(crate) loc_hash: i64,
    /// The bytes its entry reserves.
    pub(crate) bytes: i32,
    pub(crate) images: i32,
    pub(crate) videos: i32,
    pub(crate) alternates: i32,
    /// Without images, videos, alternates or cluster: it may stand in a run.
    pub(crate) plain: bool,
}

/// Plain rows on one page, in id order, placed as one: the plain rows
/// among `rows` of the section's rows, sorted (rows placed alone may stand
/// between them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Run {
    pub(crate) page: i32,
    pub(crate) rows: std::ops::Range<usize>,
}

impl Run {
    /// Its rows, from the section's rows as sorted.
    pub(super) fn members<'a>(
        &self,
        rows: &'a [Unplaced],
    ) -> impl Iterator<Item = &'a Unplaced> + Clone + use<'a> {
        rows[self.rows.clone()].iter().filter(|row| row.plain)
    }
}

/// What a page gains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PageGain {
    pub(crate) page: i32,
    pub(crate) url_count: i64,
    pub(crate) bytes: i64,
    pub(crate) images: i64,
    pub(crate) videos: i64,
    pub(crate) alternates: i64,
}

/// One section's rows, numbered.
#[derive(Debug, Default)]
pub(super) struct Numbered {
    pub(crate) runs: Vec<Run>,
    /// Rows placed one by one: (index into the rows as sorted, page).
    pub(crate) alone: Vec<(usize, i32)>,
    /// The pages the rows go on, in page order.
    pub(crate) pages: Vec<PageGain>,
}

/// How many plain rows at most stand in one run.
const RUN_ROWS: i128 = 64;

/// Numbers a section's `rows` (in any order; none left out) on from its
/// last page `tail`, if it has one. Sorts them by id, in place: the runs
/// and the rows placed alone name them by where they are then, so a batch
/// is held once, whatever its size.
pub(super) fn number_section(
    rows: &mut [Unplaced],
    tail: Option<Tail>,
    limits: Limits,
) -> Numbered {
    let Some(largest) = rows.iter().map(|row| row.bytes).max() else {
        return Numbered::default();
    };
    let max_urls = i128::from(limits.max_urls);
    let room = i128::from(limits.entry_budget - i64::from(largest)).max(1);
    let unit = max_urls * room;
    let run_units = room * RUN_ROWS;
    let (first_page, mut offset) = match tail {
        Some(tail) => (
            tail.page,
            unit.min((i128::from(tail.bytes) * max_urls).max(i128::from(tail.url_count) * room)),
        ),
        None => (1, 0),
    };
    rows.sort_unstable_by_key(|row| row.id);

    let mut numbered = Numbered::default();
    // the run being filled: its page and its share of that page
    let mut open_run: Option<(i32, i128)> = None;
    for (i, row) in rows.iter().enumerate() {
        let page = first_page + i32::try_from(offset / unit).expect("a page number that fits");
        if row.plain {
            let share = offset % unit / run_units;
            match numbered.runs.last_mut() {
                Some(run) if open_run == Some((page, share)) => run.rows.end = i + 1,
                _ => {
                    open_run = Some((page, share));
                    numbered.runs.push(Run {
                        page,
                        rows: i..i + 1,
                    });
                }
            }
        } else {
            numbered.alone.push((i, page));
        }
        if numbered.pages.last().is_none_or(|gain| gain.page != page) {
            numbered.pages.push(PageGain {
                page,
                url_count: 0,
                bytes: 0,
                images: 0,
                videos: 0,
                alternates: 0,
            });
        }
        let gain = numbered.pages.last_mut().expect("the row's page");
        gain.url_count += 1;
        gain.bytes += i64::from(row.bytes);
        gain.images += i64::from(row.images);
        gain.videos += i64::from(row.videos);
        gain.alternates += i64::from(row.alternates);
        offset += (i128::from(row.bytes) * max_urls).max(room);
    }
    numbered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(id: i64, bytes: i32) -> Unplaced {
        Unplaced {
            id,
            loc_hash: id * 31,
            bytes,
            images: 0,
            videos: 0,
            alternates: 0,
            plain: true,
        }
    }

    /// Each page's rows and bytes, from the runs and the rows alone.
    fn contents(rows: &[Unplaced], numbered: &Numbered) -> Vec<(i32, i64, i64)> {
        let mut pages = std::collections::BTreeMap::<i32, (i64, i64)>::new();
        for run in &numbered.runs {
            let page = pages.entry(run.page).or_default();
            page.0 += run.members(rows).count() as i64;
            page.1 += run.members(rows).map(|r| i64::from(r.bytes)).sum::<i64>();
        }
        for (i, page_number) in &numbered.alone {
            let page = pages.entry(*page_number).or_default();
            page.0 += 1;
            page.1 += i64::from(rows[*i].bytes);
        }
        pages.into_iter().map(|(p, (n, b))| (p, n, b)).collect()
    }

    #[test]
    fn rows_fill_the_last_page_then_new_ones_up_to_max_urls() {
        let limits = Limits {
            max_urls: 100,
            entry_budget: 1_000_000,
        };
        let mut rows: Vec<Unplaced> = (1..=250).rev().map(|id| plain(id, 150)).collect();
        let tail = Tail {
            page: 4,
            url_count: 70,
            bytes: 70 * 150,
        };
        let numbered = number_section(&mut rows, Some(tail), limits);
        assert_eq!(
            contents(&rows, &numbered),
            [
                (4, 30, 4500),
                (5, 100, 15000),
                (6, 100, 15000),
                (7, 20, 3000)
            ]
        );
        assert_eq!(
            numbered
                .pages
                .iter()
                .map(|g| (g.page, g.url_count))
                .collect::<Vec<_>>(),
            [(4, 30), (5, 100), (6, 100), (7, 20)]
        );
        // ids in order across the runs, each run on one page, 64 at most
        let ids: Vec<i64> = numbered
            .runs
            .iter()
            .flat_map(|r| r.members(&rows).map(|row| row.id))
            .collect();
        assert_eq!(ids, (1..=250).collect::<Vec<_>>());
        assert!(numbered.runs.iter().all(|r| {
            let members = r.members(&rows).count();
            members > 0 && members <= 64
        }));
        assert_eq!(rows[numbered.runs[0].rows.start].loc_hash, 31);
    }

    #[test]
    fn pages_hold_their_byte_budget_whatever_the_sizes() {
        let limits = Limits {
            max_urls: 50_000,
            entry_budget: 100_000,
        };
        // sizes from 130 to 9,000 bytes, spread by a simple generator
        let mut state = 12345u64;
        let mut rows: Vec<Unplaced> = (1..=3000)
            .map(|id| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut row = plain(id, 130 + (state >> 33) as i32 % 8870);
                row.plain = id % 7 != 0;
                row.images = i32::from(!row.plain);
                row
            })
            .collect();
        let numbered = number_section(&mut rows, None, limits);
        let pages = contents(&rows, &numbered);
        assert!(pages.len() > 30, "{} pages", pages.len());
        for (page, count, bytes) in &pages {
            assert!(
                *bytes <= limits.entry_budget,
                "page {page} holds {bytes} bytes"
            );
            assert!(*count <= limits.max_urls);
        }
        // no page is left much emptier than one entry short of room
        for (page, _, bytes) in &pages[..pages.len() - 1] {
            assert!(
                *bytes > limits.entry_budget - 2 * 9000,
                "page {page} holds only {bytes}"
            );
        }
        assert_eq!(pages.iter().map(|p| p.1).sum::<i64>(), 3000);
        let gains: Vec<(i32, i64, i64)> = numbered
            .pages
            .iter()
            .map(|g| (g.page, g.url_count, g.bytes))
            .collect();
        assert_eq!(gains, pages);
        assert_eq!(
            numbered.pages.iter().map(|g| g.images).sum::<i64>(),
            numbered.alone.len() as i64
        );
    }

    #[test]
    fn a_full_last_page_is_left_as_it_is() {
        let limits = Limits {
            max_urls: 10,
            entry_budget: 10_000,
        };
        let mut rows = vec![plain(9, 200), plain(7, 200)];
        let full = Tail {
            page: 2,
            url_count: 10,
            bytes: 2_000,
        };
        let numbered = number_section(&mut rows, Some(full), limits);
        assert_eq!(contents(&rows, &numbered), [(3, 2, 400)]);
        assert!(number_section(&mut [], Some(full), limits).pages.is_empty());
    }
}
