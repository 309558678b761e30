//! Managing sites and their tokens: what the write API's `/api/v1/sites`
//! and `sitemapd sites` and `sitemapd token --site` both do, so both give
//! the same answers and errors.

use time::OffsetDateTime;

use super::{Site, SiteDefaults, SiteError, SiteSpec};
use crate::store::{self, SiteWriteError, Store, StoredSite, Written};

/// Why a site could not be written, removed, or given a token.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// Settings that break the rules, each named.
    #[error("site {site:?}: {}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid {
        site: String,
        errors: Vec<SiteError>,
    },
    #[error("site {0:?} already exists: change it with `sites set` (or PUT)")]
    Exists(String),
    /// Another site claims the host (and path).
    #[error("site {other:?} already claims {claimed}")]
    Clash { other: String, claimed: String },
    #[error("no site {0:?}")]
    NoSuchSite(String),
    #[error(
        "site {0:?} still has URL rows: delete them first, or remove it with purge, which deletes them"
    )]
    RowsRemain(String),
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error("no randomness for a token: {0}")]
    Random(getrandom::Error),
}

impl From<SiteWriteError> for AdminError {
    fn from(error: SiteWriteError) -> Self {
        match error {
            SiteWriteError::Store(error) => AdminError::Store(error),
            SiteWriteError::Clash { other, claimed } => AdminError::Clash { other, claimed },
            SiteWriteError::NoSuchSite(name) => AdminError::NoSuchSite(name),
            SiteWriteError::RowsRemain(name) => AdminError::RowsRemain(name),
        }
    }
}

/// How sites are written: what a setting left out takes, and whether the
/// proxy strips paths (then one host holds one site).
#[derive(Debug, Clone, Copy)]
pub struct Admin<'a> {
    pub store: &'a Store,
    pub defaults: SiteDefaults,
    pub proxy_strips_prefix: bool,
}

impl Admin<'_> {
    /// Creates or changes the site `name` as `spec` says; the site
    /// before, if it existed.
    pub async fn put(
        &self,
        name: &str,
        spec: &SiteSpec,
    ) -> Result<(Site, Written, Option<Site>), AdminError> {
        let site = spec
            .site(name, self.defaults)
            .map_err(|errors| AdminError::Invalid {
                site: name.to_owned(),
                errors,
            })?;
        let before = self.store.site(name).await?.map(|stored| stored.site);
        let written = self.store.put_site(&site, self.proxy_strips_prefix).await?;
        Ok((site, written, before))
    }

    /// Creates the site `name`, which must not exist.
    pub async fn add(&self, name: &str, spec: &SiteSpec) -> Result<Site, AdminError> {
        spec.site(name, self.defaults)
            .map_err(|errors| AdminError::Invalid {
                site: name.to_owned(),
                errors,
            })?;
        if self.store.site(name).await?.is_some() {
            return Err(AdminError::Exists(name.to_owned()));
        }
        Ok(self.put(name, spec).await?.0)
    }

    /// The site `name` as stored.
    pub async fn get(&self, name: &str) -> Result<StoredSite, AdminError> {
        self.store
            .site(name)
            .await?
            .ok_or_else(|| AdminError::NoSuchSite(name.to_owned()))
    }

    /// Up to `limit` sites by name, after `after`.
    pub async fn list(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Vec<StoredSite>, AdminError> {
        Ok(self.store.list_sites(after, i64::from(limit)).await?)
    }

    /// The sites a proxy must send to another cell: arriving here from
    /// one, or moved to one (`sitemapd sites move`).
    pub async fn routed_elsewhere(&self) -> Result<std::collections::HashSet<String>, AdminError> {
        Ok(self
            .store
            .sites_routed_elsewhere()
            .await?
            .into_iter()
            .collect())
    }

    /// Removes the site `name`: refused while it has URL rows, unless
    /// `purge`, which deletes them first in short transactions. Returns the
    /// rows deleted.
    pub async fn remove(&self, name: &str, purge: bool) -> Result<u64, AdminError> {
        if purge {
            Ok(self.store.purge_site(name).await?)
        } else {
            self.store.remove_site(name).await?;
            Ok(0)
        }
    }

    /// Mints a token of the site `name`: the token (shown once) and its
    /// digest, which alone is stored.
    pub async fn mint_token(&self, name: &str) -> Result<(String, String), AdminError> {
        let (token, digest) = crate::tokens::mint().map_err(AdminError::Random)?;
        self.store.add_site_token(name, &digest).await?;
        Ok((token, digest))
    }

    /// The site `name`'s token digests, with when each was minted.
    pub async fn tokens(&self, name: &str) -> Result<Vec<(String, OffsetDateTime)>, AdminError> {
        self.get(name).await?;
        Ok(self.store.site_tokens(name).await?)
    }

    /// Revokes the site `name`'s token of `digest`; whether there was one.
    pub async fn revoke_token(&self, name: &str, digest: &str) -> Result<bool, AdminError> {
        Ok(self.store.revoke_site_token(name, digest).await?)
    }
}
