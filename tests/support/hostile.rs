//! Hostile components no Rust guest produces, built from text at test time: core code in
//! WAT inside the real component shell of our world (`command-component.wat`).

/// Little-endian bytes as a WAT data string.
fn data(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("\\{b:02x}")).collect()
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A component of the `command-plugin` world made of `memories` core instances, each with
/// its own linear memory. Its `manifest()` is well-behaved; its `execute` grows every
/// memory but the first by `grow_mib` MiB and traps if any growth is refused. Each memory
/// alone stays under the per-memory cap; together they need not.
pub fn memory_hog(memories: u32, grow_mib: u32) -> Vec<u8> {
    let pages = grow_mib * 16; // 64 KiB pages
    let helpers: Vec<u32> = (1..memories).collect();
    let imports: String = helpers
        .iter()
        .map(|i| format!("    (import \"h{i}\" \"grow\" (func $grow{i} (param i32) (result i32)))\n"))
        .collect();
    let grows: String = helpers
        .iter()
        .map(|i| format!("      (if (i32.eq (call $grow{i} (i32.const {pages})) (i32.const -1)) (then unreachable))\n"))
        .collect();
    // plugin-manifest at 2048: name, version, description, parameters (none), format,
    // capabilities (none), long-running; its strings at 1024.. (canonical ABI layout).
    let manifest = words(&[1024, 3, 1032, 5, 1040, 25, 4096, 0, 0, 4096, 0, 0]);
    // result<output, command-error> at 3072: ok, response "grew", text, no media url.
    let answer = words(&[0, 1100, 4, 0, 0, 0, 0]);
    let modules = format!(
        r#"  (core module $helper
    (memory 1)
    (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0))))
  (core module $main
{imports}    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 8192))
    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $at i32)
      (local.set $at (i32.and (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
                              (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $at) (local.get 3)))
      (if (i32.gt_u (global.get $next) (i32.shl (memory.size) (i32.const 16)))
        (then (drop (memory.grow (i32.add (i32.shr_u (global.get $next) (i32.const 16)) (i32.const 1))))))
      (local.get $at))
    (data (i32.const 1024) "hog")
    (data (i32.const 1032) "1.0.0")
    (data (i32.const 1040) "Grows every memory it has")
    (data (i32.const 1100) "grew")
    (data (i32.const 2048) "{manifest}")
    (data (i32.const 3072) "{answer}")
    (func (export "agent:plugin/command@0.1.0#manifest") (result i32) (i32.const 2048))
    (func (export "agent:plugin/command@0.1.0#execute")
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
{grows}      (i32.const 3072)))"#,
        manifest = data(&manifest),
        answer = data(&answer),
    );
    let instances: String = helpers
        .iter()
        .map(|i| format!("  (core instance $h{i} (instantiate $helper))\n"))
        .chain(std::iter::once(format!(
            "  (core instance $main (instantiate $main {}))\n",
            helpers
                .iter()
                .map(|i| format!("(with \"h{i}\" (instance $h{i}))"))
                .collect::<Vec<_>>()
                .join(" ")
        )))
        .collect();
    let shell = include_str!("command-component.wat");
    let text = shell.replace("{MODULES}", &modules).replace("{INSTANCES}", &instances);
    wat::parse_str(&text).expect("the hog component")
}
