package io.gpusched.cli;

import io.gpusched.core.host.ExitCode;

/** An error the command reports as one line with a non-zero exit code. */
public class CliException extends RuntimeException {
    private final int exitCode;

    /** @param message the line to print; the exit code is {@link ExitCode#REFUSED} */
    public CliException(String message) {
        this(message, ExitCode.REFUSED);
    }

    /** @param message the line to print @param code the exit code, from the one table */
    public CliException(String message, ExitCode code) {
        this(message, code.code());
    }

    /** @param message the line to print @param exitCode the exit code */
    public CliException(String message, int exitCode) {
        super(message);
        this.exitCode = exitCode;
    }

    /** @return the exit code */
    public int exitCode() {
        return exitCode;
    }
}
