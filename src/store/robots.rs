//! The fold's side of robots.txt checks (migration `robots_check`): which
//! sites of a fold's rows are judged and by what, and the sites judged
//! again when what they are judged by changed. The judging itself is
//! [`RobotsJudge`]'s.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::TryStreamExt;
use sqlx::PgConnection;

use super::Error;
use crate::site::robots::{RobotsCheck, RobotsJudge};

/// The reason a row its robots.txt disallows is left out with.
pub(crate) const ROBOTS_DISALLOWED: &str = "robots-disallowed";

/// How a site's locs are judged.
pub(super) struct SiteJudge {
    pub(super) check: RobotsCheck,
    pub(super) judge: Arc<RobotsJudge>,
}

/// What becomes of a row its site judges.
pub(super) enum Verdict {
    Allowed,
    /// Left out, with the rule that disallows it.
    LeftOut(String),
    /// Listed, reported with the rule that disallows it.
    Reported(String),
}

impl SiteJudge {
    pub(super) fn verdict(&self, loc: &str) -> Verdict {
        match self.judge.disallowing_rule(loc) {
            None => Verdict::Allowed,
            Some(rule) if self.check == RobotsCheck::Report => Verdict::Reported(rule),
            Some(rule) => Verdict::LeftOut(rule),
        }
    }
}

/// The judges of the sites a fold's rows belong to whose host serves a
/// robots text, by site; `sitemap_fold_judged` names them for the read of
/// the rows to place. Sites that share a text and agents share a judge.
pub(super) async fn fold_judges(
    conn: &mut PgConnection,
) -> Result<HashMap<String, SiteJudge>, Error> {
    let rows: Vec<(String, String, Vec<String>, String)> = sqlx::query_as(
        "SELECT site, robots_check, agents, robots_txt FROM sitemap_fold_robots_sites()",
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut parsed: HashMap<(String, Vec<String>), Arc<RobotsJudge>> = HashMap::new();
    let mut judges = HashMap::with_capacity(rows.len());
    for (site, check, agents, text) in rows {
        let check = RobotsCheck::parse(&check).unwrap_or_default();
        let judge = parsed
            .entry((text, agents))
            .or_insert_with_key(|(text, agents)| Arc::new(RobotsJudge::new(text, agents)))
            .clone();
        judges.insert(site, SiteJudge { check, judge });
    }
    Ok(judges)
}

/// Judges again the placed rows of every site queued in
/// `sitemap_robots_changes`, under the fold's lock: a row whose verdict
/// now leaves it out, or no longer does, is taken off its page to be
/// placed again by this fold; one listed whose rule alone changed gets the
/// new rule where it stands. Pages change where a verdict did, and nowhere
/// else. Returns how many rows changed verdict.
pub(super) async fn judge_changed_sites(conn: &mut PgConnection) -> Result<u64, Error> {
    let sites: Vec<String> =
        sqlx::query_scalar("DELETE FROM sitemap_robots_changes RETURNING site")
            .fetch_all(&mut *conn)
            .await?;
    let mut changed = 0;
    for site in sites {
        let Some((check, agents, text)) =
            sqlx::query_as::<_, (String, Vec<String>, Option<String>)>(
                "SELECT robots_check, robots_check_agents, sitemap_host_robots_txt(host)
             FROM sitemap_sites WHERE site = $1",
            )
            .bind(&site)
            .fetch_optional(&mut *conn)
            .await?
        else {
            continue;
        };
        let check = RobotsCheck::parse(&check).unwrap_or_default();
        let judge = text
            .filter(|_| check != RobotsCheck::Off)
            .map(|text| SiteJudge {
                check,
                judge: Arc::new(RobotsJudge::new(&text, &agents)),
            });
        let mut replace = Vec::new();
        let mut ruled_ids = Vec::new();
        let mut rules: Vec<Option<String>> = Vec::new();
        {
            let mut rows = sqlx::query_as::<_, (i64, String, bool, Option<String>)>(
                "SELECT id, loc, placed, robots_rule FROM sitemap_robots_verdicts($1)",
            )
            .bind(&site)
            .fetch(&mut *conn);
            while let Some((id, loc, placed, rule)) = rows.try_next().await? {
                let verdict = judge
                    .as_ref()
                    .map_or(Verdict::Allowed, |judge| judge.verdict(&loc));
                let (left_out, new_rule) = match verdict {
                    Verdict::Allowed => (false, None),
                    Verdict::LeftOut(rule) => (true, Some(rule)),
                    Verdict::Reported(rule) => (false, Some(rule)),
                };
                if left_out == placed {
                    replace.push(id);
                } else if new_rule != rule {
                    ruled_ids.push(id);
                    rules.push(new_rule);
                }
            }
        }
        if !replace.is_empty() {
            sqlx::query("SELECT sitemap_unplace($1)")
                .bind(&replace)
                .execute(&mut *conn)
                .await?;
        }
        if !ruled_ids.is_empty() {
            sqlx::query("SELECT sitemap_set_robots_rules($1, $2)")
                .bind(&ruled_ids)
                .bind(&rules)
                .execute(&mut *conn)
                .await?;
        }
        let moved = replace.len() + ruled_ids.len();
        if moved > 0 {
            tracing::info!(
                site,
                left_out_or_back = replace.len(),
                rules_changed = ruled_ids.len(),
                "judged the site's rows again against its robots.txt"
            );
        }
        changed += moved as u64;
    }
    Ok(changed)
}
