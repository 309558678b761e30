//! The fold path: the loop that places committed changes into pages, over
//! `store::fold`, which holds its SQL, and the pace it sizes folds by.

mod fold_loop;
mod pace;

pub(crate) use fold_loop::Folder;
