package io.gpusched.client;

import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuAllocationException;
import java.io.OutputStream;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * One node's GPUs, as a client sees them: what every {@code gpusched} command works against, with two
 * implementations: {@link ServiceClient}, served by the node service over its Unix socket (every user of a shared node
 * gets the one ledger, as who the kernel says they are), and the command's local client (the node ledger in this
 * process, for root without a service or an explicit {@code --state-dir}).
 *
 * <p>Allocations and devices come back in the one JSON shape of gpu-core ({@link AllocationView},
 * {@link DeviceView}). Refusals are the library's typed exceptions: {@link GpuAllocationException} with its reason,
 * {@link AccessDeniedException} naming who holds the thing and who may act, {@link io.gpusched.core.LedgerException};
 * a request a client cannot carry out (no service, a service that does not answer or answers garbage) is a
 * {@link NodeServiceException}. Requests are given in the command's flags ({@code --gpu=2}, {@code --gpu-memory=8GB},
 * {@code --lease=2h}, ...; see {@link io.gpusched.core.GpuRequests#fromCliFlags}).
 */
public interface NodeClient extends AutoCloseable {

    /** @return the node's facts: host name, backend, simulated or not, GPU count, strategy */
    NodeInfo node();

    /** @return the node's GPUs, with their health, pool, latest metrics and holders */
    List<DeviceView> devices();

    /** @return how the node's GPUs are connected */
    Topology topology();

    /**
     * Allocates now, or is refused at once.
     *
     * @param flags the request ({@code --gpu=2}, ...); the owner is the caller unless an admin names another
     * @return the allocation
     * @throws GpuAllocationException when it cannot be served now (with its reason)
     */
    AllocationView allocate(List<String> flags);

    /**
     * Allocates, waiting up to {@code wait} for busy GPUs (through the service, in its fair queue).
     *
     * @param flags the request
     * @param wait  how long to wait at most
     * @return the allocation
     * @throws GpuAllocationException when it is refused, or still cannot be served when the wait is over
     * @throws InterruptedException   when the calling thread is interrupted while it waits
     */
    AllocationView allocate(List<String> flags, Duration wait) throws InterruptedException;

    /**
     * @param id an allocation id
     * @return true if it was released now, false if it was already gone
     * @throws AccessDeniedException when the caller may not release it
     */
    boolean release(String id);

    /**
     * Releases several allocations. A client over one ledger in this process does it in one transaction (an id the
     * node never issued: nothing released); this default releases them one by one, in order, and stops at the first
     * refusal (those before it stay released).
     *
     * @param ids allocation ids
     * @return how many were released now (the others were already gone)
     * @throws AccessDeniedException when the caller may not release one of them
     */
    default int releaseAll(List<String> ids) {
        int released = 0;
        for (String id : ids) {
            released += release(id) ? 1 : 0;
        }
        return released;
    }

    /**
     * @param id    an allocation id
     * @param lease the new lease, from now
     * @return the allocation with its new lease end
     * @throws GpuAllocationException ({@code UNKNOWN_ALLOCATION}) when there is no such allocation
     * @throws AccessDeniedException  when the caller may not renew it
     */
    AllocationView renew(String id, Duration lease);

    /** @return the node's live allocations */
    List<AllocationView> allocations();

    /**
     * @param id an allocation id
     * @return that allocation, if it is live
     */
    Optional<AllocationView> allocation(String id);

    /** @return who holds what: the node's facts, GPUs and allocations at one moment */
    NodeStatus status();

    /** @return the requests waiting for GPUs, first first (the node service's fair queue) */
    List<QueueEntry> queue();

    /**
     * Changes as they come: calls {@code each} with the node's GPUs, each with the allocations holding it, at once,
     * then whenever they change (through the service: as it samples them, and as allocations begin, end or change,
     * from its event stream; locally, every {@code interval}), until {@code each} returns false or the thread is
     * interrupted.
     *
     * @param interval how often to sample the node locally
     * @param each     called with each frame; return false to stop
     * @throws InterruptedException when the calling thread is interrupted
     */
    void watch(Duration interval, Predicate<NodeSnapshot> each) throws InterruptedException;

    /**
     * @param allocationId an allocation id
     * @param cuda         a CUDA requirement ({@code >=12.1}); empty: none
     * @return what a job needs to use that allocation's GPUs
     * @throws GpuAllocationException ({@code UNKNOWN_ALLOCATION}) when there is no such allocation
     */
    AllocationEnvironment environment(String allocationId, Optional<String> cuda);

    /**
     * Runs a job attached: allocates (queueing up to the spec's wait), starts it fenced to its GPUs, streams its output
     * to {@code listener} and returns how it ended; its GPUs are released however it ends.
     *
     * @param spec     the job
     * @param listener what is reported as it happens
     * @return how the job ended
     * @throws InterruptedException when the calling thread is interrupted (the job is then ended)
     */
    JobExit run(JobSpec spec, JobListener listener) throws InterruptedException;

    /**
     * Starts a job detached: no client attached, its output in a file its owner owns (read with {@link #logs}).
     *
     * @param spec the job
     * @return the job, as started (or queued)
     */
    JobView submit(JobSpec spec);

    /** @return the node's jobs */
    List<JobView> jobs();

    /**
     * @param id a job id
     * @return that job, if there is one
     */
    Optional<JobView> job(String id);

    /**
     * Copies a detached job's output to {@code out}.
     *
     * @param id     a job id
     * @param follow whether to keep copying until the job ends
     * @param out    where to copy it
     * @throws InterruptedException when the calling thread is interrupted while it follows
     */
    void logs(String id, boolean follow, OutputStream out) throws InterruptedException;

    /**
     * Cancels a job: {@code TERM}, then {@code KILL} after the node's grace period; its GPUs are released.
     *
     * @param id a job id
     * @return the job as it stands after the request
     * @throws AccessDeniedException when the caller may not cancel it
     */
    JobView cancel(String id);

    /**
     * @param id     a job id
     * @param signal {@code INT}, {@code TERM}, {@code KILL}, {@code HUP}, {@code USR1}, {@code USR2} or {@code QUIT}
     * @return the job as it stands after the request
     * @throws AccessDeniedException when the caller may not signal it
     */
    JobView signal(String id, String signal);

    /** @return who the node takes the caller to be */
    Identity whoami();

    /**
     * @return where this client's answers come from, for messages: {@code the node service on SOCKET}, or
     *         {@code the node ledger DIR}
     */
    String source();

    /** Ends what the client holds open (streams in progress end with a {@link NodeServiceException}). */
    @Override
    void close();
}
