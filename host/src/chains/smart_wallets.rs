//! Payers that are contracts. A deployed smart wallet checks its own signatures (ERC-1271
//! `isValidSignature`); one not deployed yet sends an ERC-6492 signature: its factory, the
//! call that deploys it there, and the signature the deployed wallet will accept.
//!
//! Both are checked, and the undeployed one settled, by running a small contract creation
//! ([`deploy_then_call`]): deploy the wallet unless it has code, then make one call. As an
//! `eth_call` it checks without changing anything; as a transaction it deploys and settles
//! atomically, in one transaction of the agent's, so nothing is left half done.

use alloy::primitives::{Address, B256, Bytes, Signature};
use alloy::sol_types::{SolCall, SolValue};

alloy::sol! {
    interface IERC1271 {
        function isValidSignature(bytes32 hash, bytes signature) external view returns (bytes4);
    }
}

/// What a wallet's `isValidSignature` answers for a signature it accepts.
pub const ERC1271_MAGIC: [u8; 4] = [0x16, 0x26, 0xba, 0x7e];

/// The last 32 bytes of every ERC-6492 signature.
const ERC6492_SUFFIX: [u8; 32] = [
    0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64,
    0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92, 0x64, 0x92,
];

/// The longest signature taken: a passkey wallet's WebAuthn signature wrapped for ERC-6492
/// with its factory call is about 1.5 KB.
pub const MAX_SIGNATURE_BYTES: usize = 8 * 1024;

/// How a wallet that is not deployed yet gets deployed: a call of its factory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub factory: Address,
    pub calldata: Bytes,
}

/// A payer's signature, by who checks it.
#[derive(Debug, Clone, PartialEq)]
pub enum PayerSignature {
    /// 65 bytes (r, s, v): recovered to the payer, or, when it does not recover to it,
    /// checked by the payer's wallet contract as sent (`raw`: a wallet may give v its own
    /// meaning, which recovery normalises away).
    Ecdsa { signature: Signature, raw: Bytes },
    /// Any other form, checked by the payer's deployed wallet (ERC-1271).
    Contract(Bytes),
    /// ERC-6492: the wallet is deployed by `deployment`, then checks `signature`.
    Counterfactual { deployment: Deployment, signature: Bytes },
}

impl PayerSignature {
    /// Reads a signature as payers send it.
    pub fn parse(bytes: &[u8]) -> Result<PayerSignature, String> {
        if bytes.len() > MAX_SIGNATURE_BYTES {
            return Err(format!("it is over {MAX_SIGNATURE_BYTES} bytes"));
        }
        if let Some(wrapped) = bytes.strip_suffix(&ERC6492_SUFFIX) {
            let (factory, calldata, signature) =
                <(Address, Bytes, Bytes)>::abi_decode_params(wrapped).map_err(|_| {
                    "it ends as an ERC-6492 signature but is not (factory, calldata, signature)".to_string()
                })?;
            if factory.is_zero() || calldata.is_empty() {
                return Err("its ERC-6492 factory or factory calldata is empty".into());
            }
            return Ok(PayerSignature::Counterfactual {
                deployment: Deployment { factory, calldata },
                signature,
            });
        }
        if bytes.len() == 65
            && let Ok(signature) = Signature::from_raw(bytes)
        {
            let raw = Bytes::copy_from_slice(bytes);
            return Ok(PayerSignature::Ecdsa { signature, raw });
        }
        if bytes.is_empty() {
            return Err("it is empty".into());
        }
        Ok(PayerSignature::Contract(Bytes::copy_from_slice(bytes)))
    }

    /// The bytes a deployed wallet (and USDC, on its behalf) checks, as the payer sent them.
    pub fn checked_bytes(&self) -> Bytes {
        match self {
            PayerSignature::Ecdsa { raw, .. } => raw.clone(),
            PayerSignature::Contract(bytes) => bytes.clone(),
            PayerSignature::Counterfactual { signature, .. } => signature.clone(),
        }
    }

    /// The signature as the payer's wallet contract takes it: 65 bytes that recover to
    /// someone else are the wallet's own form, settled as sent.
    pub fn for_wallet(self) -> PayerSignature {
        match self {
            PayerSignature::Ecdsa { raw, .. } => PayerSignature::Contract(raw),
            other => other,
        }
    }

    pub fn deployment(&self) -> Option<&Deployment> {
        match self {
            PayerSignature::Counterfactual { deployment, .. } => Some(deployment),
            _ => None,
        }
    }
}

/// The call asking `wallet` whether it signed `digest` with `signature`.
pub fn is_valid_signature_call(digest: B256, signature: Bytes) -> Vec<u8> {
    IERC1271::isValidSignatureCall {
        hash: digest,
        signature,
    }
    .abi_encode()
}

/// Whether a wallet's answer to `isValidSignature` accepts the signature.
pub fn accepts(answer: &[u8]) -> bool {
    answer.len() >= 32 && answer[..4] == ERC1271_MAGIC && answer[4..32].iter().all(|b| *b == 0)
}

/// The creation code of a contract that is never left on chain: it calls `deployment`'s
/// factory unless `wallet` has code already (reverting if that call fails), then calls
/// `target` with `calldata`, and returns what that call returned (reverting with it if it
/// reverted). Sent as a transaction, the "contract" it leaves has no code.
pub fn deploy_then_call(deployment: &Deployment, wallet: Address, target: Address, calldata: &[u8]) -> Vec<u8> {
    let deploy_len = length(deployment.calldata.len());
    let call_len = length(calldata.len());
    let mut asm = Asm::default();
    // Both calldatas, which follow the program, into memory at 0.
    asm.push2(deploy_len + call_len)
        .push_label(Label::Data)
        .push1(0)
        .op(CODECOPY);
    asm.push20(wallet).op(EXTCODESIZE).push_label(Label::Call).op(JUMPI);
    // call(gas, factory, 0, [0, deploy_len), no output); revert if it failed.
    asm.push1(0)
        .push1(0)
        .push2(deploy_len)
        .push1(0)
        .push1(0)
        .push20(deployment.factory);
    asm.op(GAS).op(CALL).op(ISZERO).push_label(Label::Fail).op(JUMPI);
    asm.label(Label::Call);
    // call(gas, target, 0, [deploy_len, deploy_len + call_len), no output).
    asm.push1(0)
        .push1(0)
        .push2(call_len)
        .push2(deploy_len)
        .push1(0)
        .push20(target);
    asm.op(GAS).op(CALL);
    // Its answer into memory at 0; returned as it is, or reverted with.
    asm.op(RETURNDATASIZE).push1(0).push1(0).op(RETURNDATACOPY);
    asm.push_label(Label::Answer).op(JUMPI);
    asm.op(RETURNDATASIZE).push1(0).op(REVERT);
    asm.label(Label::Answer).op(RETURNDATASIZE).push1(0).op(RETURN);
    asm.label(Label::Fail).push1(0).op(DUP1).op(REVERT);
    asm.label(Label::Data);
    let mut code = asm.finish();
    code.extend_from_slice(&deployment.calldata);
    code.extend_from_slice(calldata);
    code
}

fn length(len: usize) -> u16 {
    // A signature is at most MAX_SIGNATURE_BYTES, factory calldata included, and a call
    // built around it adds a few words: both calldatas fit in PUSH2, and so does their sum.
    u16::try_from(len).expect("calldata under 32 KiB")
}

const _: () = assert!(2 * MAX_SIGNATURE_BYTES + 1024 < u16::MAX as usize / 2);

const CODECOPY: u8 = 0x39;
const EXTCODESIZE: u8 = 0x3b;
const RETURNDATASIZE: u8 = 0x3d;
const RETURNDATACOPY: u8 = 0x3e;
const ISZERO: u8 = 0x15;
const JUMPI: u8 = 0x57;
const GAS: u8 = 0x5a;
const JUMPDEST: u8 = 0x5b;
const DUP1: u8 = 0x80;
const CALL: u8 = 0xf1;
const RETURN: u8 = 0xf3;
const REVERT: u8 = 0xfd;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Call,
    Answer,
    Fail,
    /// Where the program ends and its data begins (not a jump target).
    Data,
}

/// Just enough of an assembler for [`deploy_then_call`]: fixed-width pushes, and labels
/// filled in at the end.
#[derive(Default)]
struct Asm {
    code: Vec<u8>,
    labels: Vec<(Label, u16)>,
    uses: Vec<(Label, usize)>,
}

impl Asm {
    fn op(&mut self, op: u8) -> &mut Self {
        self.code.push(op);
        self
    }

    fn push1(&mut self, value: u8) -> &mut Self {
        self.code.extend_from_slice(&[0x60, value]);
        self
    }

    fn push2(&mut self, value: u16) -> &mut Self {
        self.code.push(0x61);
        self.code.extend_from_slice(&value.to_be_bytes());
        self
    }

    fn push20(&mut self, address: Address) -> &mut Self {
        self.code.push(0x73);
        self.code.extend_from_slice(address.as_slice());
        self
    }

    fn push_label(&mut self, label: Label) -> &mut Self {
        self.uses.push((label, self.code.len() + 1));
        self.push2(0)
    }

    fn label(&mut self, label: Label) -> &mut Self {
        self.labels.push((label, self.code.len() as u16));
        if label != Label::Data {
            self.code.push(JUMPDEST);
        }
        self
    }

    fn finish(mut self) -> Vec<u8> {
        for (label, at) in &self.uses {
            let (_, to) = self
                .labels
                .iter()
                .find(|(l, _)| l == label)
                .expect("every label is placed");
            self.code[*at..*at + 2].copy_from_slice(&to.to_be_bytes());
        }
        self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap_6492(factory: Address, calldata: &[u8], inner: &[u8]) -> Vec<u8> {
        let mut bytes = (factory, Bytes::copy_from_slice(calldata), Bytes::copy_from_slice(inner)).abi_encode_params();
        bytes.extend_from_slice(&ERC6492_SUFFIX);
        bytes
    }

    #[test]
    fn signatures_are_told_apart_by_form() {
        let ecdsa = Signature::test_signature().as_bytes();
        assert!(matches!(
            PayerSignature::parse(&ecdsa),
            Ok(PayerSignature::Ecdsa { .. })
        ));
        // A v recovery would normalise (1 for 28) reaches a wallet as sent.
        let mut v_one = ecdsa;
        v_one[64] = 1;
        let parsed = PayerSignature::parse(&v_one).unwrap();
        assert_eq!(parsed.checked_bytes()[64], 1);
        assert_eq!(
            parsed.for_wallet(),
            PayerSignature::Contract(Bytes::copy_from_slice(&v_one))
        );
        // 65 bytes that are no ECDSA signature (v is 5): a wallet's own form.
        let mut odd = ecdsa;
        odd[64] = 5;
        assert!(matches!(PayerSignature::parse(&odd), Ok(PayerSignature::Contract(_))));
        let long = vec![7u8; 300];
        assert_eq!(
            PayerSignature::parse(&long),
            Ok(PayerSignature::Contract(Bytes::from(long.clone())))
        );
        let factory = Address::repeat_byte(0xfa);
        let wrapped = wrap_6492(factory, b"deploy me", &long);
        let PayerSignature::Counterfactual { deployment, signature } = PayerSignature::parse(&wrapped).unwrap() else {
            panic!("not read as ERC-6492");
        };
        assert_eq!(deployment.factory, factory);
        assert_eq!(&deployment.calldata[..], b"deploy me");
        assert_eq!(signature, Bytes::from(long));
    }

    #[test]
    fn malformed_signatures_are_refused() {
        assert!(PayerSignature::parse(&[]).is_err());
        assert!(PayerSignature::parse(&vec![1u8; MAX_SIGNATURE_BYTES + 1]).is_err());
        // The suffix after bytes that are no ABI tuple.
        let mut junk = vec![0xffu8; 40];
        junk.extend_from_slice(&ERC6492_SUFFIX);
        assert!(PayerSignature::parse(&junk).is_err());
        assert!(PayerSignature::parse(&wrap_6492(Address::ZERO, b"x", b"sig")).is_err());
        assert!(PayerSignature::parse(&wrap_6492(Address::repeat_byte(1), b"", b"sig")).is_err());
    }

    #[test]
    fn only_the_magic_value_accepts() {
        let mut answer = [0u8; 32];
        answer[..4].copy_from_slice(&ERC1271_MAGIC);
        assert!(accepts(&answer));
        assert!(!accepts(&answer[..4]), "too short");
        answer[31] = 1;
        assert!(!accepts(&answer), "dirty padding");
        assert!(!accepts(&[0u8; 32]));
    }

    #[test]
    fn the_program_jumps_only_to_its_jumpdests_and_carries_both_calls() {
        let deployment = Deployment {
            factory: Address::repeat_byte(0xfa),
            calldata: Bytes::from_static(b"deploy"),
        };
        let code = deploy_then_call(
            &deployment,
            Address::repeat_byte(0xaa),
            Address::repeat_byte(0xbb),
            b"settle",
        );
        assert!(code.ends_with(b"deploysettle"));
        let program = &code[..code.len() - 12];
        // Walk the program: every PUSH2 right before a JUMPI names a JUMPDEST.
        let mut at = 0;
        let mut jumps = 0;
        while at < program.len() {
            let op = program[at];
            let width = if (0x60..=0x7f).contains(&op) {
                (op - 0x5f) as usize
            } else {
                0
            };
            if op == 0x61 && program.get(at + 3) == Some(&JUMPI) {
                let target = u16::from_be_bytes([program[at + 1], program[at + 2]]) as usize;
                assert_eq!(program[target], JUMPDEST, "jump to {target}");
                jumps += 1;
            }
            at += 1 + width;
        }
        assert_eq!(jumps, 3);
        // The CODECOPY copies from the program's end, both calldatas' lengths.
        assert_eq!(&code[..3], &[0x61, 0, 12]);
        assert_eq!(u16::from_be_bytes([code[4], code[5]]) as usize, program.len());
    }
}
