//! Findings about the parts of a file no loader reads: the section headers, as elfpatch found
//! them. Damage (a table cut short, names out of bounds) is a warning: the file loads, but it
//! is most likely a broken install, and elfpatch and patchelf refuse to edit a table that does
//! not fit in it. Facts no loader cares about (a section whose content is not aligned as its
//! header says, as in NVIDIA's libraries) are one info finding per file: said here, never in a
//! build log.

use elfpatch::{Warning, WarningKind};

use super::rules::{AuditFinding, DAMAGED, HARMLESS, LAYOUT};

/// The findings of one file's section-header warnings: one per damage, one for all the facts.
pub fn findings(warnings: &[Warning]) -> Vec<AuditFinding> {
    let mut out: Vec<AuditFinding> = warnings
        .iter()
        .filter(|w| w.kind == WarningKind::Damage)
        .map(|w| AuditFinding::new(DAMAGED, w.to_string()))
        .collect();
    let facts: Vec<&Warning> = warnings
        .iter()
        .filter(|w| w.kind == WarningKind::Harmless)
        .collect();
    if let Some(first) = facts.first() {
        let more = match facts.len() {
            1 => String::new(),
            n => format!(" (and {} more like it)", n - 1),
        };
        out.push(AuditFinding::new(HARMLESS, format!("{first}{more}")));
    }
    out
}

/// The findings of one file's layout problems: one error each.
pub fn layout_findings(problems: &[String]) -> Vec<AuditFinding> {
    problems
        .iter()
        .map(|p| AuditFinding::new(LAYOUT, format!("the layout is inconsistent: {p}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::rules::Severity;
    use super::*;

    fn warning(kind: WarningKind, part: &str, problem: &'static str) -> Warning {
        Warning {
            kind,
            part: part.into(),
            problem,
            detail: "details".into(),
        }
    }

    #[test]
    fn damage_is_a_warning_each_and_the_facts_one_info() {
        let w = [
            warning(
                WarningKind::Damage,
                "section header table",
                "section header table out of bounds",
            ),
            warning(
                WarningKind::Harmless,
                "section header 12",
                "section content is not naturally aligned",
            ),
            warning(
                WarningKind::Harmless,
                "section header 13",
                "section content is not naturally aligned",
            ),
        ];
        let f = findings(&w);
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!((f[0].code, f[0].severity), ("SS013", Severity::Warning));
        assert!(f[0].message.contains("out of bounds"), "{}", f[0].message);
        assert_eq!((f[1].code, f[1].severity), ("SS014", Severity::Info));
        assert!(
            f[1].message.contains("section header 12") && f[1].message.contains("1 more"),
            "{}",
            f[1].message
        );
        assert!(findings(&[]).is_empty());
        let l = layout_findings(&["DT_GNU_HASH at address 0x1000: outside".into()]);
        assert_eq!((l[0].code, l[0].severity), ("SS015", Severity::Error));
        assert!(l[0].message.contains("DT_GNU_HASH"), "{}", l[0].message);
    }
}
