fn main() {
    std::process::exit(agent_host::cli::main());
}
