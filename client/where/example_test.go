package where_test

import (
	"errors"
	"fmt"

	"github.com/protobase/protobase/client/where"
)

func Example() {
	e, err := where.Parse(`age >= 30 AND (name prefix "An" OR email contains '@example') and not deleted`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(e.GetAnd().GetExprs()), "terms")
	fmt.Println(e.GetAnd().GetExprs()[0].GetCmp().GetField(), e.GetAnd().GetExprs()[0].GetCmp().GetOp())
	fmt.Println(where.Format(e))

	_, err = where.Parse(`age >= )`)
	fmt.Println(err)
	var se *where.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Pretty())
	}
	// Output:
	// 3 terms
	// age OP_GE
	// age >= 30 and (name prefix "An" or email contains "@example") and not deleted
	// column 8: expected value after ">=", found ")"
	// age >= )
	//        ^
	// expected value after ">=", found ")"
}
