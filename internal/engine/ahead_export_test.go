package engine

// AheadsTaken is how many Applies took phase 1 from a.
func AheadsTaken(a *Ahead) int { return a.taken }
