package engine

// AheadsTaken is how many Applies took phase 1 from a.
func AheadsTaken(a *Ahead) int { return a.taken }

// AheadArenaCap is the capacity of the arena a keeps.
func AheadArenaCap(a *Ahead) int {
	if a.w == nil {
		return 0
	}
	return cap(a.w.arena)
}

// WriterArenaCap is the capacity of the key arena w keeps.
func WriterArenaCap(w *Writer) int { return cap(w.arena) }
