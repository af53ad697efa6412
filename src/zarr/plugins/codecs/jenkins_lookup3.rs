//! numcodecs' `JenkinsLookup3` checksum: v2 id `jenkins_lookup3`, v3 name
//! `numcodecs.jenkins_lookup3`.
//!
//! Bob Jenkins' lookup3 hash as HDF5 computes it (`H5_checksum_lookup3`), seeded with
//! `initval`, appended to the payload as 4 bytes little-endian. A `prefix` (bytes hashed
//! before the payload) cannot be written into zarr metadata by numcodecs, so only a null
//! prefix is accepted.

use super::checksum32::{Location, checksum_codec};
use super::{Config, bad_config, codec_traits, field, int_field, register_codec};
use zarrs_plugin::{PluginCreateError, ZarrVersion};

/// The numcodecs JenkinsLookup3 codec.
#[derive(Clone, Debug)]
pub(crate) struct JenkinsLookup3Codec {
    config: Config,
    initval: u32,
    location: Location,
}

zarrs_plugin::impl_extension_aliases!(JenkinsLookup3Codec,
    v3: "numcodecs.jenkins_lookup3", [],
    v2: "jenkins_lookup3", []
);
register_codec!(JenkinsLookup3Codec, BytesToBytes, v2 + v3);
codec_traits!(JenkinsLookup3Codec);
checksum_codec!(JenkinsLookup3Codec, "numcodecs.jenkins_lookup3");

impl JenkinsLookup3Codec {
    fn new(config: Config, _version: ZarrVersion) -> Result<Self, PluginCreateError> {
        let initval = int_field("jenkins_lookup3", &config, "initval", 0)?;
        let initval = u32::try_from(initval).map_err(|_| {
            bad_config(
                "jenkins_lookup3",
                format!("initval {initval} is not a 32-bit unsigned integer"),
            )
        })?;
        if let Some(p) = field(&config, "prefix") {
            return Err(bad_config(
                "jenkins_lookup3",
                format!(
                    "a prefix ({p}) is not supported; numcodecs itself cannot store one in zarr metadata"
                ),
            ));
        }
        Ok(JenkinsLookup3Codec {
            config,
            initval,
            location: Location::End,
        })
    }

    fn checksum(&self, payload: &[u8]) -> u32 {
        lookup3(payload, self.initval)
    }
}

fn rot(x: u32, k: u32) -> u32 {
    x.rotate_left(k)
}

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= rot(*c, 4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= rot(*a, 6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= rot(*b, 8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= rot(*c, 16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= rot(*a, 19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= rot(*b, 4);
    *b = b.wrapping_add(*a);
}

fn finish(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 14));
    *a ^= *c;
    *a = a.wrapping_sub(rot(*c, 11));
    *b ^= *a;
    *b = b.wrapping_sub(rot(*a, 25));
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 16));
    *a ^= *c;
    *a = a.wrapping_sub(rot(*c, 4));
    *b ^= *a;
    *b = b.wrapping_sub(rot(*a, 14));
    *c ^= *b;
    *c = c.wrapping_sub(rot(*b, 24));
}

/// `H5_checksum_lookup3(key, length, initval)`.
fn lookup3(key: &[u8], initval: u32) -> u32 {
    let word = |k: &[u8]| -> u32 {
        k.iter().enumerate().fold(0u32, |acc, (i, &byte)| {
            acc.wrapping_add(u32::from(byte) << (8 * i))
        })
    };
    let start = 0xdead_beef_u32
        .wrapping_add(key.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (start, start, start);
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(word(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(word(&k[8..]));
    }
    finish(&mut a, &mut b, &mut c);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numcodecs() {
        // numcodecs.jenkins.jenkins_lookup3(np.frombuffer(b"hello", "u1"), 0)
        assert_eq!(lookup3(b"hello", 0), 885_767_278);
        // The lookup3 test vectors from Bob Jenkins' driver5(): hashlittle("", 0) and
        // hashlittle("Four score and seven years ago", 0 / 1).
        assert_eq!(lookup3(b"", 0), 0xdead_beef);
        assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd62_8161);
    }
}
