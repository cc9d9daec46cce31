package io.gpusched.cli;

/** An error the command reports as one line with a non-zero exit code. */
public class CliException extends RuntimeException {
    private final int exitCode;

    /** @param message the line to print */
    public CliException(String message) {
        this(message, 2);
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
