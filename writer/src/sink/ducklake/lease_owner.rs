//! Who holds a partition's lease: one identity per process start.
//!
//! Two live writers must never share an owner: a force-deleted pod on an
//! unreachable node and its replacement carry the same `POD_NAME`, and so do
//! two containers started by hand. So the owner is the pod's name, its UID
//! (`POD_UID`, from the downward API) and a token drawn at each start:
//! `<name>/<uid>/<token>`, `-` for an unknown UID.
//!
//! A writer restarted in the same pod (same name and UID: the container
//! before it has exited) takes that pod's leases back at once. Without
//! `POD_UID` a restarted writer waits until the lease its previous run held
//! is released (a clean stop) or runs out (a kill).

/// The owner this process writes into the lease rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseOwner {
    /// `<name>/<uid>/<token>`.
    pub id: String,
    /// `<name>/<uid>/`: earlier runs in this same pod, when the UID is known.
    pub same_pod: Option<String>,
}

impl LeaseOwner {
    /// `name`: POD_NAME, else HOSTNAME, else `writer`; `uid`: POD_UID.
    pub fn new(name: Option<String>, uid: Option<String>) -> LeaseOwner {
        let name = name.unwrap_or_else(|| "writer".to_owned());
        let token = uuid::Uuid::new_v4().simple().to_string();
        let pod = format!("{name}/{}/", uid.as_deref().unwrap_or("-"));
        LeaseOwner {
            id: format!("{pod}{}", &token[..12]),
            same_pod: uid.map(|_| pod),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_is_a_new_owner_and_only_a_known_pod_uid_reclaims() {
        let a = LeaseOwner::new(Some("millpond-0".into()), None);
        let b = LeaseOwner::new(Some("millpond-0".into()), None);
        assert_ne!(a.id, b.id, "two starts with one POD_NAME");
        assert!(a.id.starts_with("millpond-0/-/"), "{}", a.id);
        assert_eq!(a.same_pod, None);

        let c = LeaseOwner::new(Some("millpond-0".into()), Some("u-1".into()));
        let d = LeaseOwner::new(Some("millpond-0".into()), Some("u-1".into()));
        assert_ne!(c.id, d.id);
        assert_eq!(c.same_pod.as_deref(), Some("millpond-0/u-1/"));
        assert!(d.id.starts_with(c.same_pod.as_deref().unwrap()));
        assert!(LeaseOwner::new(None, None).id.starts_with("writer/-/"));
    }
}
