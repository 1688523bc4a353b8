"""Air-gapped bundles: one file holding everything a setup needs (sources, artifacts, wheels, locks).

``manifest`` is the format (what a bundle lists and is for), ``archive`` writes bundle files and ``reading``
verifies and extracts them, ``signature`` signs and checks their manifests with ssh-keygen, ``trust`` judges
who made one (trusted keys, an expected digest), ``errors`` says what can be wrong with one. Making a bundle
(``create``) and seeding a machine from one (``importer``) are built on these.
"""

from .archive import extract_members, seal, verify_bundle, write_bundle
from .errors import BundleDamaged, BundleIncomplete, BundleMismatch
from .manifest import BUNDLE_SCHEMA, MANIFEST_NAME, Manifest, Member, MemberKind, member_name

__all__ = ["BUNDLE_SCHEMA", "MANIFEST_NAME", "BundleDamaged", "BundleIncomplete", "BundleMismatch", "Manifest",
           "Member", "MemberKind", "extract_members", "member_name", "seal", "verify_bundle", "write_bundle"]
