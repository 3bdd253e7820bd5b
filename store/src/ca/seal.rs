//! Sealing the deployment CA's key for the database (PostgreSQL): AES-256-GCM under a key the
//! operator keeps outside it (`EGRESSGATE_CA_SEAL_KEY` or `--ca-seal-key-file`), a random
//! nonce per seal and the row's id as associated data, so a sealed key copied into another
//! row does not open. Whoever reads the database alone never sees the CA's key.

use base64::Engine as _;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};

use super::CaError;

/// What starts a sealed key's text (then base64 of the nonce, the ciphertext and the tag).
const SEALED: &str = "egressgate-sealed-v1:";

/// Why a seal key was not accepted (the key itself is never part of the message).
#[derive(Debug, thiserror::Error)]
pub enum SealKeyError {
    /// Not base64 of exactly 32 bytes.
    #[error("expected 32 random bytes, base64 (e.g. `head -c 32 /dev/urandom | base64`)")]
    Malformed,
}

/// The key that seals the CA's key in the database (32 bytes).
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(<redacted>)")
    }
}

impl SealKey {
    /// The key from its base64 text (surrounding whitespace ignored, as a file has a newline).
    pub fn from_base64(text: &str) -> Result<Self, SealKeyError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| SealKeyError::Malformed)?;
        bytes
            .try_into()
            .map(Self)
            .map_err(|_| SealKeyError::Malformed)
    }

    /// A key of 32 `byte`s, for tests.
    #[cfg(test)]
    pub(super) fn repeated(byte: u8) -> Self {
        Self([byte; 32])
    }

    fn aead(&self) -> Result<LessSafeKey, CaError> {
        UnboundKey::new(&AES_256_GCM, &self.0)
            .map(LessSafeKey::new)
            .map_err(|_| CaError::Corrupt("seal key"))
    }

    /// `key_pem` sealed for the row `id`.
    pub(super) fn seal(&self, id: i64, key_pem: &str) -> Result<String, CaError> {
        self.seal_for(&ca_context(id), key_pem)
    }

    /// The key PEM sealed in row `id`; [`CaError::WrongSealKey`] when this key (or this row)
    /// is not the one it was sealed for.
    pub fn open(&self, id: i64, sealed: &str) -> Result<String, CaError> {
        self.open_for(&ca_context(id), sealed)
    }

    /// A key from 32 raw bytes (a deployment key kept in the database, for secrets that need
    /// a seal when the operator gave none); `None` for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }

    /// `plain` sealed for `context` (the associated data: the sealed text opens only for the
    /// same context, so a sealed value copied into another row or table does not open). Other
    /// secrets than the CA's key (webhook signing secrets) are sealed with this.
    pub fn seal_for(&self, context: &str, plain: &str) -> Result<String, CaError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| CaError::Corrupt("no randomness"))?;
        let mut data = plain.as_bytes().to_vec();
        self.aead()?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(context.as_bytes().to_vec()),
                &mut data,
            )
            .map_err(|_| CaError::Corrupt("sealing"))?;
        let mut out = nonce.to_vec();
        out.append(&mut data);
        Ok(format!(
            "{SEALED}{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// What [`Self::seal_for`] sealed for `context`; [`CaError::WrongSealKey`] when this key
    /// (or this context) is not the one it was sealed for.
    pub fn open_for(&self, context: &str, sealed: &str) -> Result<String, CaError> {
        let body = sealed
            .strip_prefix(SEALED)
            .ok_or(CaError::Corrupt("sealed key"))?;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(body.trim())
            .map_err(|_| CaError::Corrupt("sealed key"))?;
        if raw.len() < NONCE_LEN {
            return Err(CaError::Corrupt("sealed key"));
        }
        let (nonce, data) = raw.split_at(NONCE_LEN);
        let nonce =
            Nonce::try_assume_unique_for_key(nonce).map_err(|_| CaError::Corrupt("nonce"))?;
        let mut data = data.to_vec();
        let plain = self
            .aead()?
            .open_in_place(nonce, Aad::from(context.as_bytes().to_vec()), &mut data)
            .map_err(|_| CaError::WrongSealKey)?;
        String::from_utf8(plain.to_vec()).map_err(|_| CaError::Corrupt("sealed key"))
    }
}

/// The associated data binding a sealed CA key to its row.
fn ca_context(id: i64) -> String {
    format!("egressgate deployment_ca {id}")
}

/// Whether a stored key is sealed (else it is a PEM key an older release kept in clear).
pub(super) fn is_sealed(stored: &str) -> bool {
    stored.starts_with(SEALED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SealKey {
        SealKey::repeated(byte)
    }

    #[test]
    fn a_sealed_key_opens_only_with_its_key_and_in_its_row() -> Result<(), CaError> {
        let pem = "-----BEGIN PRIVATE KEY-----\nsecret\n-----END PRIVATE KEY-----\n";
        let sealed = key(1).seal(7, pem)?;
        assert!(is_sealed(&sealed));
        assert!(!sealed.contains("PRIVATE KEY") && !sealed.contains("secret"));
        assert_ne!(sealed, key(1).seal(7, pem)?, "a fresh nonce each time");
        assert_eq!(key(1).open(7, &sealed)?, pem);
        assert!(matches!(
            key(2).open(7, &sealed),
            Err(CaError::WrongSealKey)
        ));
        assert!(
            matches!(key(1).open(8, &sealed), Err(CaError::WrongSealKey)),
            "another row"
        );
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(key(1).open(7, &tampered).is_err());
        assert!(!is_sealed(pem));
        Ok(())
    }

    #[test]
    fn a_seal_key_is_32_bytes_of_base64_and_never_shown() {
        let text = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        let k = SealKey::from_base64(&format!("{text}\n"));
        assert!(k.as_ref().is_ok_and(|k| !format!("{k:?}").contains(&text)));
        for bad in [
            "",
            "short",
            &base64::engine::general_purpose::STANDARD.encode([9u8; 31]),
        ] {
            assert!(SealKey::from_base64(bad).is_err(), "{bad:?}");
        }
    }
}
