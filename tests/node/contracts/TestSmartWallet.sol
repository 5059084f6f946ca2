// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {Create2} from "@openzeppelin/contracts/utils/Create2.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// A smart wallet shaped as the ones payers hold (Coinbase Smart Wallet's scheme): its
/// owners sign a replay-safe hash (the hash wrapped in an EIP-712 message bound to this
/// wallet and chain), and its signature is `abi.encode(ownerIndex, ownerSignature)`, so
/// never 65 bytes. USDC checks it through ERC-1271. Each wallet is a small proxy of one
/// implementation, as real wallet factories deploy them, so deploying one is cheap.
contract TestSmartWallet is IERC1271, EIP712 {
    bytes32 private constant MESSAGE_TYPEHASH = keccak256("WalletMessage(bytes32 hash)");

    address[] public owners;

    constructor() EIP712("Test Smart Wallet", "1") {}

    function initialize(address owner) external {
        require(owners.length == 0, "initialized");
        owners.push(owner);
    }

    function replaySafeHash(bytes32 hash) public view returns (bytes32) {
        return _hashTypedDataV4(keccak256(abi.encode(MESSAGE_TYPEHASH, hash)));
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        (uint256 ownerIndex, bytes memory ownerSignature) = abi.decode(signature, (uint256, bytes));
        (address signer, ECDSA.RecoverError failure,) = ECDSA.tryRecover(replaySafeHash(hash), ownerSignature);
        if (failure == ECDSA.RecoverError.NoError && ownerIndex < owners.length && signer == owners[ownerIndex]) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}

/// Deploys wallets at addresses known before they exist (of owner and salt), as smart-wallet
/// factories do: a payer's wallet can hold USDC, and sign, before it is deployed.
contract TestSmartWalletFactory {
    address public immutable implementation = address(new TestSmartWallet());

    function createAccount(address owner, uint256 salt) external returns (address wallet) {
        wallet = getAddress(owner, salt);
        if (wallet.code.length == 0) {
            Clones.cloneDeterministic(implementation, _salt(owner, salt));
            TestSmartWallet(wallet).initialize(owner);
        }
    }

    function getAddress(address owner, uint256 salt) public view returns (address) {
        return Clones.predictDeterministicAddress(implementation, _salt(owner, salt));
    }

    function _salt(address owner, uint256 salt) private pure returns (bytes32) {
        return keccak256(abi.encode(owner, salt));
    }
}

/// A wallet whose signature check burns gas (`loops` rounds) before it says yes: what a
/// wallet that makes the agent pay for its check looks like.
contract TestBurningWallet is IERC1271 {
    uint256 public immutable loops;

    constructor(uint256 rounds) {
        loops = rounds;
    }

    function isValidSignature(bytes32, bytes calldata) external view returns (bytes4) {
        uint256 spent;
        for (uint256 i = 0; i < loops; i++) {
            spent += i;
        }
        return spent == type(uint256).max ? bytes4(0) : IERC1271.isValidSignature.selector;
    }
}

/// Deploys burning wallets at addresses known before (CREATE2 of the rounds).
contract TestBurningWalletFactory {
    function createAccount(uint256 rounds) external returns (address wallet) {
        wallet = getAddress(rounds);
        if (wallet.code.length == 0) {
            new TestBurningWallet{salt: bytes32(rounds)}(rounds);
        }
    }

    function getAddress(uint256 rounds) public view returns (address) {
        bytes memory code = abi.encodePacked(type(TestBurningWallet).creationCode, abi.encode(rounds));
        return Create2.computeAddress(bytes32(rounds), keccak256(code));
    }
}
