#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads passwords and confirmations, never from the command line (where `ps` and the shell history see them).
///
/// On a terminal: a prompt on stderr, then the line read without echo; new passwords are asked twice.
/// Otherwise (a pipe or file): one line per password from stdin, in the order the command documents,
/// without confirmation.
public struct PasswordPrompter: Sendable {
    public var isTerminal: Bool
    /// Shows the prompt and reads one line, without echo when `hidden`; nil at end of input.
    var readLine: @Sendable (_ prompt: String, _ hidden: Bool) -> String?

    public init(isTerminal: Bool, readLine: @escaping @Sendable (_ prompt: String, _ hidden: Bool) -> String?) {
        self.isTerminal = isTerminal
        self.readLine = readLine
    }

    /// Standard input: the terminal when it is one, else lines of the pipe.
    public static var standardInput: PasswordPrompter {
        let isTerminal = isatty(STDIN_FILENO) == 1
        return PasswordPrompter(isTerminal: isTerminal) { prompt, hidden in
            guard isTerminal else { return Swift.readLine(strippingNewline: true) }
            Console.prompt(prompt)
            return hidden ? readWithoutEcho() : Swift.readLine(strippingNewline: true)
        }
    }

    /// An existing password (`what` names it in the prompt and in errors, e.g. "current password").
    public func password(_ what: String) throws(CLIError) -> String {
        guard let password = self.readLine("\(what.capitalizedFirst): ", true) else {
            throw .input("no \(what) given: \(Self.inputRule)")
        }
        return password
    }

    /// A new password: asked twice on a terminal.
    public func newPassword(_ what: String = "new password") throws(CLIError) -> String {
        let password = try self.password(what)
        guard self.isTerminal else { return password }
        guard let again = self.readLine("Repeat the \(what): ", true) else {
            throw .input("no \(what) confirmation given")
        }
        guard again == password else { throw .input("the passwords do not match; nothing was changed") }
        return password
    }

    /// Asks for `expected` to be typed (with echo) on a terminal; fails without one unless `assumeYes`.
    public func confirm(_ question: String, typing expected: String, assumeYes: Bool) throws(CLIError) {
        if assumeYes { return }
        guard self.isTerminal else {
            throw .input("refusing without a terminal to confirm on: pass --yes")
        }
        guard let answer = self.readLine("\(question) Type \(expected) to confirm: ", false),
            answer.trimmingSpaces == expected
        else {
            throw .input("not confirmed; nothing was changed")
        }
    }

    static let inputRule = "type it at the prompt, or pipe it in on standard input (one line per password)"
}

/// The saved terminal settings while echo is off, for the SIGINT handler to restore.
nonisolated(unsafe) private var savedTerminal = termios()

/// Reads one line from the terminal on stdin with echo off; Ctrl-C restores echo before the process ends.
private func readWithoutEcho() -> String? {
    var original = termios()
    guard tcgetattr(STDIN_FILENO, &original) == 0 else { return readLine(strippingNewline: true) }
    savedTerminal = original
    var silent = original
    silent.c_lflag &= ~tcflag_t(ECHO)
    silent.c_lflag |= tcflag_t(ECHONL)  // still echo the newline, so the next output starts on its own line
    let previousHandler = signal(SIGINT) { _ in
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &savedTerminal)
        _exit(130)
    }
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
    defer {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
        signal(SIGINT, previousHandler)
    }
    return readLine(strippingNewline: true)
}

extension String {
    fileprivate var capitalizedFirst: String { self.prefix(1).uppercased() + self.dropFirst() }

    var trimmingSpaces: String {
        String(
            self.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed()
        )
    }
}
