//! The fold path: the loop that places committed changes into pages, over
//! `store::fold`, which holds its SQL.

mod fold_loop;

pub(crate) use fold_loop::Folder;
