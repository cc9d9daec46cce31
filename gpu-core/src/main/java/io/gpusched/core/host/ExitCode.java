package io.gpusched.core.host;

import io.gpusched.core.BackendUnavailableException;
import io.gpusched.core.GpuException;
import io.gpusched.core.LedgerException;

/**
 * The one table of exit codes for every gpusched entry point: the {@code gpusched} command and the container entry
 * points ({@code io.gpusched.yarn.YarnContainerGpus}). README's "Exit codes" shows the same table. {@code gpusched run}
 * exits with its command's code ({@code 128+N} when a signal N ended it); when its command cannot be started it exits
 * as a shell does ({@link #COMMAND_NOT_RUNNABLE}, {@link #COMMAND_NOT_FOUND}).
 */
public enum ExitCode {
    /** Done. */
    OK(0),
    /**
     * A check found a problem ({@code export slurm --check} drift, a failed {@code selftest} check), or an
     * unexpected error (a bug, an I/O failure: {@code --verbose} shows the trace).
     */
    FAILED(1),
    /**
     * The command as given cannot be done: a usage error, a bad input file or configuration, or a request the node
     * or its service refuses ({@code gpusched: <REASON>: ...} first on standard error, such as
     * {@code INSUFFICIENT_GPUS}).
     */
    REFUSED(2),
    /** The node ledger has no GPUs for the container named ({@code gpusched env}, {@code YarnContainerGpus}). */
    NO_GPUS(3),
    /**
     * The node cannot be read: no GPU backend here, or the node ledger absent, unreadable by this user, not trusted
     * or damaged ({@code UNREADABLE}, {@code INSECURE_PERMISSIONS}, {@code CORRUPT}, ... first on standard error).
     */
    NODE_UNREADABLE(4),
    /**
     * {@code gpusched run}: the command was found but cannot be run by the job's user (not executable), or the
     * working directory cannot be entered as that user, as a shell's 126.
     */
    COMMAND_NOT_RUNNABLE(126),
    /** {@code gpusched run}: the command was not found (as a path, or on the job's {@code PATH}), as a shell's 127. */
    COMMAND_NOT_FOUND(127);

    private final int code;

    ExitCode(int code) {
        this.code = code;
    }

    /** @return the process exit status */
    public int code() {
        return code;
    }

    /**
     * @param error what ended the command
     * @return its code: {@link #NODE_UNREADABLE} for a ledger or backend error, {@link #REFUSED} for any other
     *         gpusched error or a bad argument, {@link #FAILED} for anything else
     */
    public static ExitCode of(Throwable error) {
        if (error instanceof LedgerException || error instanceof BackendUnavailableException) {
            return NODE_UNREADABLE;
        }
        if (error instanceof GpuException || error instanceof IllegalArgumentException) {
            return REFUSED;
        }
        return FAILED;
    }
}
