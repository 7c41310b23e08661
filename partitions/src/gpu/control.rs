//! The control messages of the launch path (host, global CP, local CPs, SMs, DRAM channels;
//! the protocol is in the documentation of [`super::cp`]). They carry kernel and CTA
//! indices, not a context: the kernel is named. How they travel is [`crate::packet`].
//!
//! Synchronization events (a grid barrier reached, a sync word released), preemption
//! commands (save, restore a context) and credits go here as further variants: each fits
//! the inline form's two free words.

/// One control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Local CP -> SM: CTA `cta` of kernel `kernel` (listing indices).
    Dispatch { kernel: u32, cta: u32 },
    /// SM -> local CP: CTA `cta` of kernel `kernel` has completed.
    CtaDone { kernel: u32, cta: u32 },
    /// Host -> channel: the trace's command `command` (a `MemcpyHtoD`) has happened.
    Memcpy { command: u32 },
    /// Global CP -> local CP: run this chiplet's share of kernel `kernel`.
    Slice { kernel: u32 },
    /// Local CP -> global CP: this chiplet's share of kernel `kernel` has completed.
    SliceDone { kernel: u32 },
    /// Global CP -> local CP, and local CP -> its channels: write back and invalidate the
    /// private L2 at the end of kernel `kernel` (the kernel-boundary release and acquire).
    Flush { kernel: u32 },
    /// Channel -> local CP (its write-backs have left), and local CP -> global CP (all its
    /// channels have): the flush after kernel `kernel` is done.
    FlushDone { kernel: u32 },
    /// Host -> a GPU's global CP (`system.gpus` > 1, GPUs other than 0): the host launched
    /// `kernel`; it is the `launch`-th launch of the command list.
    Launch { kernel: u32, launch: u32 },
    /// A GPU's global CP -> host: a kernel of GPU `gpu` has completed (`system.gpus` > 1).
    KernelDone { gpu: u32 },
    /// Link interface -> the link interface that sent it a packet: `bytes` of the receive
    /// buffer of virtual channel `vc` of the sender's link `link` are free again
    /// (`mem/credits.rs`; `link` names the sender's link as `mem/link.rs` numbers them).
    Credit { link: u32, vc: u32, bytes: u32 },
}
